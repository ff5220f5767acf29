// idx.h — reads the IDX files of (Fashion-)MNIST, gzipped as Debian ships them.
//
// IDX is a big-endian header (magic, dimension sizes) followed by raw bytes. Kept free of
// torch so it compiles in seconds and can be tested on its own; the trainer turns the bytes
// into tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

/// An IDX file of unsigned bytes: `dims` sizes (e.g. {60000, 28, 28}) and the data.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
  int64_t items() const { return dims.empty() ? 0 : dims[0]; }
};

/// Reads a gzip-compressed (or plain) IDX file of type ubyte with `expectedRank`
/// dimensions: its first `maxItems` items only where 0 < maxItems < the file's count (dims[0]
/// is then maxItems), since inflating all 60,000 training images costs ~0.4 s of CPU a
/// process, most of a short run's data loading. Throws std::runtime_error naming the file and
/// what is wrong with it.
IdxArray readIdx(const std::string& path, int expectedRank, int64_t maxItems = 0);

}  // namespace trainer
