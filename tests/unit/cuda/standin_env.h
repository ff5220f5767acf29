// standin_env.h — the collective matrix's DeviceEnv on the CUDA TEST STAND-IN, with the
// path (staging or device) every wrapped stream is forced to take.
#pragma once

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "src/cuda/device_path.h"
#include "tests/unit/cuda/coll_matrix.h"
#include "tests/unit/cuda/cuda_standin.h"

namespace cu = chorus::cuda;

class StandinEnv final : public collmatrix::DeviceEnv {
 public:
  StandinEnv(standin::CudaStandin& rt, cu::PathMode mode) : rt_(rt), mode_(mode) {}
  void* alloc(size_t bytes) override { return rt_.deviceAlloc(bytes); }
  void free(void*) override {}  // the stand-in's arena is freed with it
  void* newStream() override { return rt_.createStream(); }
  void deleteStream(void* s) override { rt_.destroyStream(s); }
  void upload(void* dev, const void* host, size_t bytes, void* stream) override {
    unsigned char* d = static_cast<unsigned char*>(rt_.hostView(dev));
    if (bytes != 0) rt_.enqueue(stream, [=] { std::memcpy(d, host, bytes); });  // count 0: null
  }
  void download(void* host, const void* dev, size_t bytes, void* stream) override {
    const unsigned char* d = static_cast<const unsigned char*>(rt_.hostView(dev));
    if (bytes != 0) rt_.enqueue(stream, [=] { std::memcpy(host, d, bytes); });
  }
  chorusResult_t wrap(void* stream, chorusStream_t* out) override {
    chorusResult_t r = cu::streamFromRuntime(rt_, stream, out);
    if (r == chorusSuccess) {
      cu::forcePathForTests(*out, mode_);
      ++wraps;
    }
    return r;
  }
  std::atomic<int> wraps{0};  // streams wrapped (each holds one pinned flag block)

 private:
  standin::CudaStandin& rt_;
  cu::PathMode mode_;
};

inline std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& l : v) s += l + "\n";
  return s;
}
