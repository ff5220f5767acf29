#include "src/comm/exec_lock.h"

#include <sched.h>
#include <unistd.h>

namespace chorus {

std::unique_lock<std::mutex> lockExec(chorusComm* comm) {
  std::unique_lock<std::mutex> lock(comm->execMutex);
  ExecBias& b = comm->execBias;
  // `state` changes only under the mutex: what we read here stays true while we hold it.
  if (b.state.load(std::memory_order_relaxed) != ExecBias::kBiased ||
      b.owner.load(std::memory_order_relaxed) == execThreadId())
    return lock;
  b.state.store(ExecBias::kRevoked, std::memory_order_relaxed);
  asymHeavyFence();  // pairs with enterBiased's light fence (asym_fence.h)
  for (int spins = 0; b.busy.load(std::memory_order_acquire) != 0; ++spins) {
    if (comm->abortFlag.load(std::memory_order_relaxed))
      for (auto& t : comm->transports) t->wakeAll();
    if (spins < 100) {
      sched_yield();
    } else {
      usleep(100);
    }
  }
  return lock;
}

void claimExecBias(chorusComm* comm) {
  ExecBias& b = comm->execBias;
  if (b.state.load(std::memory_order_relaxed) != ExecBias::kNone) return;
  if (!asymFenceReady()) {  // never biased: every call takes the mutex, as before
    b.state.store(ExecBias::kRevoked, std::memory_order_relaxed);
    return;
  }
  b.owner.store(execThreadId(), std::memory_order_relaxed);
  b.state.store(ExecBias::kBiased, std::memory_order_release);
}

}  // namespace chorus
