// pieces.h — how a call on device buffers is cut into pieces (pure functions, unit-tested).
//
// Every collective's buffers are `nblocks` blocks of `count` elements (all-reduce: 1 block
// each side; all-gather: 1 in, n out; all-to-all: n and n; a root-only buffer: 0 blocks on
// the other ranks). A piece is the same element range [first, first+count) of every block,
// packed block after block into a pinned staging area: running the *same collective* on
// the packed pieces gives, piece by piece, exactly the result of the whole call. So the
// host algorithms run unchanged on each piece while the next one is still being copied
// off the GPU and the previous one copied back (docs/CUDA.md).
#pragma once

#include <cstddef>
#include <vector>

#include "src/core/coll.h"

namespace chorus {
namespace cuda {

struct BlockLayout {
  int nblocks = 0;  // 0: this rank has no such buffer in this call
};

struct CallLayout {
  BlockLayout send, recv;
};

/// The blocks of each buffer of `coll` on `rank` (root: the root or peer, -1 if none).
CallLayout callLayout(Coll coll, int nranks, int rank, int root);

struct Piece {
  size_t first = 0;  // first element of the range, in every block
  size_t count = 0;  // elements per block in this piece
};

/// Splits `count` elements of `elemBytes` into pieces of at most `pieceBytes` per block
/// (rounded down to whole elements, at least one). pieceBytes 0: one piece. count 0: one
/// empty piece (the collective still runs once, as on the host).
std::vector<Piece> splitPieces(size_t count, size_t elemBytes, size_t pieceBytes);

}  // namespace cuda
}  // namespace chorus
