// coll_matrix.h — every collective x type x op on device buffers, on 1..4 thread ranks, each
// rank with its own CUDA stream, checked against an independent reference.
//
// Shared by the stand-in unit test (tests/unit/cuda) and the GPU suite (tests/gpu): the
// only difference is the DeviceEnv, which allocates device memory, copies in stream order
// and wraps a stream. Inputs are small integers, so every sum, product, min and max is
// exact in every type and any association gives the same bits; avg is checked with a
// tolerance on floating types (its pre-multiplication rounds).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "chorus.h"

namespace collmatrix {

class DeviceEnv {
 public:
  virtual ~DeviceEnv() = default;
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* dev) = 0;
  virtual void* newStream() = 0;
  virtual void deleteStream(void* stream) = 0;
  /// Copies in stream order (the host buffer stays alive until the stream is synced).
  virtual void upload(void* dev, const void* host, size_t bytes, void* stream) = 0;
  virtual void download(void* host, const void* dev, size_t bytes, void* stream) = 0;
  virtual chorusResult_t wrap(void* stream, chorusStream_t* out) = 0;
};

struct Options {
  std::vector<int> nranks{1, 2, 3, 4};
  size_t count = 1000;  // elements per block
  bool allTypesAndOps = true;
  bool sendRecv = true;  // the send/recv pair (a group) of every type
};

/// Runs the matrix; returns one line per wrong element or failed call (empty: all good).
std::vector<std::string> run(DeviceEnv& env, const Options& opt);

}  // namespace collmatrix
