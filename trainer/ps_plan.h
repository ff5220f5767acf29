// ps_plan.h — how the parameter-server mode (--ps-servers) cuts the model into shards.
//
// Each tensor goes whole to the least-loaded server, except large ones (more than half a
// server's fair share, with at least K rows), which are split by rows over all K servers.
// The plan depends only on the tensor shapes and K, so every rank computes the same one
// without communication. A server's buffer is its shards concatenated in plan order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

struct PsTensor {
  std::string name;
  int64_t rows = 1;     // size of dim 0 (1 for a scalar)
  int64_t rowSize = 1;  // elements per row
};

struct PsShard {
  size_t tensor = 0;  // index into the tensor list
  int64_t rowBegin = 0, rowEnd = 0;
  int server = 0;            // 0..K-1
  int64_t serverOffset = 0;  // element offset inside that server's buffer
  int64_t count = 0;         // elements
};

struct PsPlan {
  int servers = 0;
  std::vector<PsTensor> tensors;
  std::vector<PsShard> shards;          // in plan order (tensor order, then rows)
  std::vector<int64_t> serverElements;  // buffer size of each server
  /// The shards of `server`, in its buffer's order.
  std::vector<size_t> shardsOf(int server) const;
  /// Several lines: one per server (its shards and element count).
  std::string describe() const;
};

/// Throws std::invalid_argument when servers < 1.
PsPlan makePsPlan(const std::vector<PsTensor>& tensors, int servers);

}  // namespace trainer
