// Lifecycle (rendezvous through the c10d store), the launch path every operation takes,
// point-to-point, barriers and coalescing. The collectives are in collectives.cc.
#include "python/csrc/process_group.h"

#include <ATen/Context.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <memory>
#include <stdexcept>

#include "python/csrc/completion_queue.h"
#include "python/csrc/work.h"

namespace chorus_torch {
namespace {

constexpr const char* kUniqueIdKey = "chorus_unique_id";

}  // namespace

ProcessGroupChorus::ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout,
                                       int reproducible)
    : BackendBase(rank, size), store_(store), timeout_(timeout) {
  // The store PyTorch hands us is already prefixed per group, so one key suffices.
  chorusUniqueId id;
  if (rank == 0) {
    if (chorusGetUniqueId(&id) != chorusSuccess) throwChorus("chorusGetUniqueId");
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store_->set(kUniqueIdKey, std::vector<uint8_t>(p, p + sizeof(id)));
  } else {
    std::vector<uint8_t> bytes = store_->get(kUniqueIdKey);
    TORCH_CHECK(bytes.size() == sizeof(id), "chorus: the store holds a unique id of ", bytes.size(),
                " bytes, expected ", sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  chorusConfig_t config = CHORUS_CONFIG_INITIALIZER;
  // Chorus's own deadline on every wait is the process group's timeout ("monitored"
  // operations: a silent peer fails the operation instead of hanging it).
  config.timeoutSeconds = static_cast<int>(std::max<int64_t>(1, (timeout.count() + 999) / 1000));
  config.commName = "torch";
  // torch.use_deterministic_algorithms(True) asks for the same bits run to run: the
  // reproducible mode gives them on any layout of the same world size (options win).
  if (reproducible == CHORUS_CONFIG_UNDEF_INT && at::globalContext().deterministicAlgorithms())
    reproducible = 1;
  config.reproducible = reproducible;
  if (chorusCommInitRankConfig(&comm_, size, id, rank, &config) != chorusSuccess)
    throwChorus("chorusCommInitRankConfig");
  if (chorusStreamCreate(&stream_) != chorusSuccess) {
    chorusCommDestroy(comm_);
    throwChorus("chorusStreamCreate");
  }
  queue_ = std::make_shared<CompletionQueue>(comm_, stream_);
  init();
}

ProcessGroupChorus::~ProcessGroupChorus() {
  // Never wait for the completion thread while holding the GIL: finishing its last Works
  // drops tensors that Python also references, and that decref takes the GIL. (Seen as a
  // hang in destroy_process_group about one run in a few dozen.)
  std::unique_ptr<pybind11::gil_scoped_release> noGil;
  if (Py_IsInitialized() && PyGILState_Check())
    noGil = std::make_unique<pybind11::gil_scoped_release>();
  queue_->shutdown();
  chorusStreamDestroy(stream_);
  chorusCommDestroy(comm_);
}

void ProcessGroupChorus::throwChorus(const char* what) const {
  throw std::runtime_error(std::string("chorus: ") + what + " failed on rank " +
                           std::to_string(rank_) + ": " + chorusGetLastError(comm_));
}

std::chrono::milliseconds ProcessGroupChorus::opTimeout(std::chrono::milliseconds requested) const {
  return requested == c10d::kUnsetTimeout ? timeout_ : requested;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::launch(
    c10d::OpType type, const char* name, LaunchMode mode, std::vector<at::Tensor> outputs,
    const std::function<chorusResult_t(chorusStream_t)>& issue, std::function<void(bool)> finish,
    std::vector<at::Tensor> keepAlive, int sourceRank) {
  auto refused = [&](const std::string& detailIn) {
    std::string detail = detailIn.empty() ? chorusGetLastError(nullptr) : detailIn;
    if (finish) finish(false);
    throw std::runtime_error(std::string("chorus ") + name + " failed on rank " +
                             std::to_string(rank_) + ": " + detail);
  };
  // The call's one Work (it takes the outputs, the completion and the kept tensors).
  auto newWork = [&] {
    return c10::make_intrusive<ChorusWork>(rank_, type, name, ++seq_, opTimeout(mode.timeout),
                                           std::move(outputs), std::move(finish),
                                           std::move(keepAlive), queue_, sourceRank);
  };
  // A Work that is over before it is returned: failed with `error`, or done if it is "".
  auto completed = [&](const std::string& error) {
    auto work = newWork();
    work->complete(error);
    return work;
  };
  // Once an operation of this group failed, the communicator is not trusted: a later one
  // fails with that first error at once and is never issued (issuing it would run a
  // collective the other ranks may never join, and wait out the timeout again).
  if (!coalescing_) {
    std::string first = queue_->firstFailure();
    if (!first.empty()) return completed(first);
  }
  // A per-operation timeout other than the group's is only honoured by Work::wait, so such
  // an operation takes the stream.
  if (mode.callerWaits && !coalescing_ &&
      (mode.timeout == c10d::kUnsetTimeout || mode.timeout == timeout_)) {
    std::string error;
    bool argumentError = false;
    if (queue_->runInline([&] { return issue(nullptr); }, &error, &argumentError)) {
      if (argumentError) refused(chorusGetLastError(comm_));
      return completed(error);
    }
  }
  if (issue(stream_) != chorusSuccess) refused(chorusGetLastError(comm_));
  auto work = newWork();
  if (coalescing_)
    coalesced_.push_back(work);  // its calls run at chorusGroupEnd, not yet
  else
    queue_->add(work);
  return work;
}

ReduceMapping ProcessGroupChorus::prepareReduce(const c10d::ReduceOp& op, const at::Tensor& like,
                                                bool* userOp) {
  *userOp = false;
  Reduction r = Reduction::Sum;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: r = Reduction::Sum; break;
    case c10d::ReduceOp::AVG: r = Reduction::Avg; break;
    case c10d::ReduceOp::PRODUCT: r = Reduction::Product; break;
    case c10d::ReduceOp::MIN: r = Reduction::Min; break;
    case c10d::ReduceOp::MAX: r = Reduction::Max; break;
    case c10d::ReduceOp::PREMUL_SUM: r = Reduction::PreMulSum; break;
    case c10d::ReduceOp::BAND: r = Reduction::BitwiseAnd; break;
    case c10d::ReduceOp::BOR: r = Reduction::BitwiseOr; break;
    case c10d::ReduceOp::BXOR: r = Reduction::BitwiseXor; break;
    default: TORCH_CHECK(false, "chorus: unknown ReduceOp ", static_cast<int>(op.op_));
  }
  ReduceMapping m = mapReduction(like.scalar_type(), r);
  TORCH_CHECK(m.error.empty(), m.error);
  if (r == Reduction::PreMulSum) {
    auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(sup, "chorus: PREMUL_SUM without a factor");
    double factor = sup->double_factor;
    const std::vector<at::Tensor> factors = premulTensorFactors(*sup);
    if (!factors.empty()) {
      TORCH_CHECK(factors.size() == 1 && factors[0].numel() == 1,
                  "chorus: PREMUL_SUM needs exactly one scalar factor tensor");
      checkCpuTensor(factors[0], "PREMUL_SUM factor");
      factor = factors[0].item<double>();
    }
    alignas(8) unsigned char scalar[8] = {0};
    packScalar(factor, m.type, scalar);
    if (chorusRedOpCreatePreMulSum(&m.op, scalar, m.type, chorusScalarHostImmediate, comm_) !=
        chorusSuccess)
      throwChorus("chorusRedOpCreatePreMulSum");
    *userOp = true;
  }
  return m;
}

std::function<void(bool)> ProcessGroupChorus::destroyOpWhenDone(bool userOp, chorusRedOp_t op,
                                                                std::function<void(bool)> next) {
  if (!userOp) return next;
  chorusComm_t comm = comm_;
  return [comm, op, next](bool ok) {
    chorusRedOpDestroy(op, comm);
    if (next) next(ok);
  };
}

// ---------------------------------------------------------------------------------------
// Point to point. Chorus matches sends and receives by peer, in order; the tag is not
// part of the match (documented in docs/TORCH.md).

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::send(std::vector<at::Tensor>& tensors,
                                                        int dstRank, int /*tag*/) {
  TORCH_CHECK(tensors.size() == 1, "chorus send: exactly one tensor per call");
  checkCpuTensor(tensors[0], "send");
  at::Tensor buf = staged(tensors[0]);
  chorusComm_t comm = comm_;
  return launch(c10d::OpType::SEND, "send", {c10d::kUnsetTimeout, false}, tensors,
                [&](chorusStream_t s) {
                  return chorusSend(buf.data_ptr(), nbytes(buf), chorusUint8, dstRank, comm, s);
                },
                nullptr, {buf});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recv(std::vector<at::Tensor>& tensors,
                                                        int srcRank, int /*tag*/) {
  TORCH_CHECK(tensors.size() == 1, "chorus recv: exactly one tensor per call");
  checkCpuTensor(tensors[0], "recv");
  at::Tensor t = tensors[0];
  at::Tensor buf = staged(t);
  chorusComm_t comm = comm_;
  return launch(
      c10d::OpType::RECV, "recv", {c10d::kUnsetTimeout, false}, tensors,
      [&](chorusStream_t s) {
        return chorusRecv(buf.data_ptr(), nbytes(buf), chorusUint8, srcRank, comm, s);
      },
      [t, buf](bool ok) {
        if (ok) unstage(t, buf);
      },
      {buf}, srcRank);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                 int /*tag*/) {
  TORCH_CHECK(tensors.size() == 1, "chorus recv: exactly one tensor per call");
  TORCH_CHECK(!coalescing_, "chorus: recv without a source cannot be batched (coalesced)");
  checkCpuTensor(tensors[0], "recv");
  at::Tensor t = tensors[0];
  at::Tensor buf = staged(t);
  // Chorus writes the sender's rank here when the receive completes, on the stream.
  at::Tensor from = at::full({1}, -1, at::kInt);
  int* fromPtr = from.data_ptr<int>();
  chorusComm_t comm = comm_;
  auto work = launch(
      c10d::OpType::RECVANYSOURCE, "recv", {c10d::kUnsetTimeout, false}, tensors,
      [&](chorusStream_t s) {
        return chorusRecvAnySource(buf.data_ptr(), nbytes(buf), chorusUint8, fromPtr, comm, s);
      },
      [t, buf](bool ok) {
        if (ok) unstage(t, buf);
      },
      {buf, from});
  static_cast<ChorusWork*>(work.get())->setSourceTensor(from);
  return work;
}

void ProcessGroupChorus::startCoalescing() {
  TORCH_CHECK(!coalescing_, "chorus: coalescing already started");
  if (chorusGroupStart() != chorusSuccess) throwChorus("chorusGroupStart");
  coalescing_ = true;
}

#if !CHORUS_TORCH2
void ProcessGroupChorus::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) {
  finishCoalescing();
}
#endif

void ProcessGroupChorus::finishCoalescing() {
  TORCH_CHECK(coalescing_, "chorus: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<c10::intrusive_ptr<ChorusWork>> works;
  works.swap(coalesced_);
  if (chorusGroupEnd() != chorusSuccess) {
    std::string detail = chorusGetLastError(nullptr);
    for (auto& w : works) w->complete("chorus: the batched send/recv group failed: " + detail);
    throwChorus("chorusGroupEnd");
  }
  for (auto& w : works) queue_->add(w);
}

// ---------------------------------------------------------------------------------------
// Barriers.

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::barrier(const c10d::BarrierOptions& opts) {
  chorusComm_t comm = comm_;
  return launch(c10d::OpType::BARRIER, "barrier", modeOf(opts), {},
                [&](chorusStream_t s) { return chorusBarrier(comm, s); }, nullptr, {});
}

// Like gloo's: rank 0 waits for every other rank within the timeout and names the ones
// that did not arrive. Through the store, not the communicator, so a rank that never calls
// it cannot leave a half-done collective behind.
void ProcessGroupChorus::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  const auto timeout = opTimeout(opts.timeout);
  const std::string prefix =
      "chorus_monitored_barrier/" + std::to_string(++monitoredBarriers_) + "/";
  if (rank_ != 0) {
    store_->set(prefix + std::to_string(rank_), std::vector<uint8_t>{1});
    try {
      store_->wait({prefix + "done"}, timeout);
    } catch (const std::exception& e) {
      throw std::runtime_error("chorus monitored_barrier: rank " + std::to_string(rank_) +
                               " was not released by rank 0 within " +
                               std::to_string(timeout.count()) + " ms: " + e.what());
    }
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> missing;
  for (int r = 1; r < size_; ++r) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() < 1) left = std::chrono::milliseconds(1);
    try {
      store_->wait({prefix + std::to_string(r)}, left);
    } catch (const std::exception&) {
      missing.push_back(r);
      if (!waitAllRanks) break;
    }
  }
  if (!missing.empty()) {
    std::string list;
    for (int r : missing) list += (list.empty() ? "" : ", ") + std::to_string(r);
    throw std::runtime_error(
        "chorus monitored_barrier: rank" + std::string(missing.size() > 1 ? "s " : " ") + list +
        " failed to pass monitored_barrier within " + std::to_string(timeout.count()) + " ms");
  }
  store_->set(prefix + "done", std::vector<uint8_t>{1});
}

}  // namespace chorus_torch
