// compat_torch.h — everything that differs between the two PyTorch versions chorus_torch
// is built for, in one place:
//   - PyTorch 1.13 (Debian 12's libtorch-dev, /usr/bin/python3): the backend is a
//     c10d::ProcessGroup, batch_isend_irecv coalesces through endCoalescing(reqs);
//   - PyTorch 2.x (the pinned wheel in .venv-torch2, python/torch2/meson.build): the backend
//     is a c10d::Backend wrapped by torch's own ProcessGroup, endCoalescing() returns one
//     Work, and there are the *_tensor_coalesced collectives (python/csrc/torch2_ops.cc).
#pragma once

#include <torch/csrc/api/include/torch/version.h>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#define CHORUS_TORCH2 1
// Backend::supportsCoalescing (2.8 has it; batch_isend_irecv on CPU then coalesces).
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 8
#define CHORUS_TORCH_SUPPORTS_COALESCING 1
#endif
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define CHORUS_TORCH2 0
#endif
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <type_traits>
#include <utility>
#include <vector>

namespace chorus_torch {

/// How one operation is to run: its timeout (kUnsetTimeout: the group's), and whether its
/// caller waits for it at once, so it may run on the caller's thread. PyTorch 2.x says so
/// in the options (asyncOp is false under a blocking dist.* call); 1.13's options cannot.
struct LaunchMode {
  std::chrono::milliseconds timeout;
  bool callerWaits;
};

template <typename Opts, typename = void>
struct HasAsyncOp : std::false_type {};
template <typename Opts>
struct HasAsyncOp<Opts, std::void_t<decltype(std::declval<const Opts&>().asyncOp)>>
    : std::true_type {};

template <typename Opts>
LaunchMode modeOf(const Opts& opts) {
  if constexpr (HasAsyncOp<Opts>::value)
    return {opts.timeout, !opts.asyncOp};
  else
    return {opts.timeout, false};
}

#if CHORUS_TORCH2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

/// The tensor factors of a PREMUL_SUM (empty when the factor is a double).
inline std::vector<at::Tensor> premulTensorFactors(const c10d::NCCLPreMulSumSupplement& s) {
#if CHORUS_TORCH2
  if (s.tensor_factor.defined()) return {s.tensor_factor};
  return {};
#else
  return s.tensor_factors;
#endif
}

}  // namespace chorus_torch
