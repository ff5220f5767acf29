#include "src/cuda/pieces.h"

namespace chorus {
namespace cuda {

CallLayout callLayout(Coll coll, int nranks, int rank, int root) {
  const bool isRoot = rank == root;
  CallLayout l;
  switch (coll) {
    case Coll::AllReduce:
      l.send.nblocks = 1;
      l.recv.nblocks = 1;
      break;
    case Coll::Broadcast:
      l.send.nblocks = isRoot ? 1 : 0;
      l.recv.nblocks = 1;
      break;
    case Coll::Reduce:
      l.send.nblocks = 1;
      l.recv.nblocks = isRoot ? 1 : 0;
      break;
    case Coll::AllGather:
      l.send.nblocks = 1;
      l.recv.nblocks = nranks;
      break;
    case Coll::ReduceScatter:
      l.send.nblocks = nranks;
      l.recv.nblocks = 1;
      break;
    case Coll::Scatter:
      l.send.nblocks = isRoot ? nranks : 0;
      l.recv.nblocks = 1;
      break;
    case Coll::Gather:
      l.send.nblocks = 1;
      l.recv.nblocks = isRoot ? nranks : 0;
      break;
    case Coll::AllToAll:
      l.send.nblocks = nranks;
      l.recv.nblocks = nranks;
      break;
    case Coll::Send: l.send.nblocks = 1; break;
    case Coll::Recv: l.recv.nblocks = 1; break;
    case Coll::Barrier: break;
  }
  return l;
}

std::vector<Piece> splitPieces(size_t count, size_t elemBytes, size_t pieceBytes) {
  size_t per = pieceBytes / elemBytes;
  if (pieceBytes == 0 || count == 0) return {Piece{0, count}};
  if (per == 0) per = 1;
  std::vector<Piece> out;
  out.reserve((count + per - 1) / per);
  for (size_t first = 0; first < count; first += per)
    out.push_back(Piece{first, count - first < per ? count - first : per});
  return out;
}

}  // namespace cuda
}  // namespace chorus
