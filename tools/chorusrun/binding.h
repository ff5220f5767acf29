// binding.h — which CPUs each local rank of a job may run on (chorusrun --bind-to).
//
// Ranks that spin while they wait for each other must not share a core: a rank polling a
// flag on the core its peer is queued on keeps the peer from writing it. The kernel places
// unbound ranks where it likes, and on a busy machine it often puts two ranks of one job
// on one core (a futex wake-up pulls the woken rank to the waker's core) and leaves them
// there. Like mpirun (--bind-to core for small jobs), chorusrun gives each local rank its
// own core when there are enough of them, on every host of the job: this machine's ranks
// in the child it forks, a remote host's through `chorusrun --bound-exec` run there
// (bound_exec.h), which plans with that host's own cores.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace chorusrun {

enum class BindMode { kAuto, kCore, kNone };

/// Parses --bind-to's value: "core", "none" or "auto"; false for anything else.
bool parseBindMode(const std::string& text, BindMode* mode);

/// Whether `mode` may bind a host's `localSize` ranks at all (not none, not auto's lone
/// rank); planBinding still decides by the host's cores.
bool mayBind(BindMode mode, int localSize);

/// CPU sets for `localSize` ranks on this machine, one per local rank: local rank i gets
/// the i-th core chorusrun itself may use, in (package, core) order (all hardware threads
/// of that core). More ranks than cores: auto runs them unbound, silently, as mpirun does;
/// core binds local rank i to core i mod ncores (as Intel MPI pins), with *note saying so.
/// A host's lone rank: auto leaves it unbound (it has no rank of its job to collide with on
/// its host, and hosts that share one kernel would all bind theirs to core 0).
/// Empty when the ranks run unbound (mode none too). `sysRoot` is where /sys lives (tests
/// use a fake).
std::vector<cpu_set_t> planBinding(int localSize, BindMode mode, std::string* note,
                                   const std::string& sysRoot = "");

}  // namespace chorusrun
