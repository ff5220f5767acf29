#include "src/core/asym_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "src/core/params.h"

namespace chorus {

namespace {

long membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0); }

// The process that registered (0: none yet, -1: this kernel or CHORUS_ASYM_FENCE says no).
// A forked child has another pid and registers for itself: the registration belongs to
// the address space, and a child's is new.
std::atomic<int> registeredPid{0};

}  // namespace

bool asymFenceReady() {
  const int pid = static_cast<int>(getpid());
  const int known = registeredPid.load(std::memory_order_acquire);
  if (known == pid) return true;
  if (known == -1) return false;
  if (paramInt(Param::AsymFence) == 0) {
    registeredPid.store(-1, std::memory_order_release);
    return false;
  }
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  const bool offered = cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
                       (cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);
  if (!offered || membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0) {
    registeredPid.store(-1, std::memory_order_release);
    return false;
  }
  registeredPid.store(pid, std::memory_order_release);
  return true;
}

void asymHeavyFence() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace chorus
