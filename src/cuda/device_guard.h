// device_guard.h — makes a stream's device current for a scope and restores the caller's.
// Kernels can only be launched into a stream of the current device, and a user thread
// may have any device current when it calls Chorus.
#pragma once

#include <string>

#include "src/cuda/runtime.h"

namespace chorus {
namespace cuda {

class DeviceGuard {
 public:
  DeviceGuard(const Runtime& rt, int device) : rt_(rt) {
    std::string err;
    if (!rt_.getDevice(&previous_, &err)) {
      ok_ = false;
      error_ = err;
      return;
    }
    if (previous_ == device) return;
    if (!rt_.setDevice(device, &err)) {
      ok_ = false;
      error_ = err;
      return;
    }
    changed_ = true;
  }
  ~DeviceGuard() {
    std::string ignored;
    if (changed_) (void)rt_.setDevice(previous_, &ignored);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

 private:
  const Runtime& rt_;
  int previous_ = -1;
  bool changed_ = false;
  bool ok_ = true;
  std::string error_;
};

}  // namespace cuda
}  // namespace chorus
