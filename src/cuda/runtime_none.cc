// runtime_none.cc — the Runtime of a host-only build (-Dcuda=disabled): no GPU can be used,
// and every call says so. Pointers are all "host": the host pointer checks decide.
#include <string>

#include "src/cuda/runtime.h"

namespace chorus {
namespace cuda {
namespace {

constexpr const char* kNoCuda =
    "this build of Chorus has no CUDA support (built with -Dcuda=disabled)";

bool no(std::string* err) {
  if (err) *err = kNoCuda;
  return false;
}

class NoCudaRuntime final : public Runtime {
 public:
  const char* name() const override { return "none"; }
  bool usable(std::string* why) const override { return no(why); }
  bool classify(const void*, PtrInfo* out, std::string*) const override {
    *out = PtrInfo{};
    return true;
  }
  bool streamDevice(void*, int*, std::string* err) const override { return no(err); }
  bool getDevice(int*, std::string* err) const override { return no(err); }
  bool setDevice(int, std::string* err) const override { return no(err); }
  bool hostAllocMapped(size_t, void**, void**, std::string* err) const override { return no(err); }
  void hostFree(void*) const override {}
  bool memcpy2DAsync(void*, size_t, const void*, size_t, size_t, size_t, void*,
                     std::string* err) const override {
    return no(err);
  }
  bool eventCreate(void**, std::string* err) const override { return no(err); }
  void eventDestroy(void*) const override {}
  bool eventRecord(void*, void*, std::string* err) const override { return no(err); }
  bool eventSynchronize(void*, std::string* err) const override { return no(err); }
  bool waitFlag(const volatile uint64_t*, uint64_t, void*, std::string* err) const override {
    return no(err);
  }
  bool streamSynchronize(void*, std::string* err) const override { return no(err); }
  bool deviceMalloc(size_t, void**, std::string* err) const override { return no(err); }
  void deviceFree(void*) const override {}
  bool ipcGetHandle(void*, IpcHandle*, std::string* err) const override { return no(err); }
  bool ipcOpenHandle(const IpcHandle&, void**, std::string* err) const override { return no(err); }
  void ipcCloseHandle(void*) const override {}
  bool canAccessPeer(int, int, bool*, std::string* err) const override { return no(err); }
  bool deviceCount(int*, std::string* err) const override { return no(err); }
  bool streamCreate(void**, std::string* err) const override { return no(err); }
  void streamDestroy(void*) const override {}
  bool launchReduce(const kernels::ReduceArgs&, void*, std::string* err) const override {
    return no(err);
  }
  bool launchCopy(const kernels::CopyArgs&, void*, std::string* err) const override {
    return no(err);
  }
};

}  // namespace

const Runtime& defaultRuntime() {
  static const NoCudaRuntime rt;
  return rt;
}

}  // namespace cuda
}  // namespace chorus
