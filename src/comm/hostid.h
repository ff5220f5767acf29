// hostid.h — which ranks share a host (and so can share memory), and which share a kernel
// (and so the CPUs it runs them on).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace chorus {

/// Hash of hostname + boot id, or of CHORUS_HOSTID when set (namespaced test hosts).
uint64_t hostHash();

/// What a rank tells the others so they can tell whether one kernel runs them both. Hosts
/// that are not machines of their own (network namespaces as tools/cluster makes them,
/// containers) have a hostname and maybe a boot id of their own, yet their ranks queue for
/// the same CPUs. Two facts tell that: the kernel's boot id, where it is not masked (a
/// container shows the machine's), and, where it is (tools/cluster bind-mounts one per
/// host), the process itself: a peer whose pid this kernel shows, started at the very
/// clock tick the peer reports, in a kernel booted at the same second, is a process of
/// this kernel. Different machines differ in boot id, and a pid of theirs that happens to
/// exist here does not also match the start tick and the boot time.
struct KernelRecord {
  uint64_t bootHash = 0;    ///< hash of /proc/sys/kernel/random/boot_id (0: unreadable)
  int64_t bootTime = 0;     ///< "btime" of /proc/stat: seconds since the epoch (0: unknown)
  uint64_t startTicks = 0;  ///< field 22 of /proc/self/stat (0: unknown)
  int32_t pid = 0;
  int32_t pad = 0;
};
static_assert(sizeof(KernelRecord) == 32, "exchanged as bytes");

/// This process's record.
KernelRecord ownKernelRecord();

/// Start time of process `pid` in clock ticks since boot (field 22 of /proc/PID/stat);
/// 0 where the process is not visible here.
uint64_t processStartTicks(int pid);

/// True where `other` is certainly a process of the kernel that runs `mine`: the same
/// readable boot id, or its pid visible here with the start tick and boot time it reported.
bool sameKernel(const KernelRecord& mine, const KernelRecord& other);

/// Per rank, the lowest rank it knows runs on its own kernel (itself at worst), from every
/// rank's record: what each rank computes for itself before the leaders are exchanged.
int kernelLeader(const std::vector<KernelRecord>& all, int me);

/// The CPUs a set of ranks compete for: how many of the job's ranks one kernel runs, and
/// how many CPUs those ranks may use between them (the union of their affinity masks;
/// bit i % 64 of word i / 64: CPU i). cpus is 0 where every mask is empty (nothing known).
struct KernelShare {
  int ranks = 0;
  int cpus = 0;
  /// More ranks than CPUs: they queue for the CPUs (false where the CPUs are not known).
  bool crowded() const { return cpus > 0 && ranks > cpus; }
};
/// Per rank, the share of its kernel, from every rank's kernel (any id that is equal for
/// the ranks of one kernel, e.g. its kernelLeader) and CPU mask (one pass; one entry per
/// rank in each vector).
std::vector<KernelShare> kernelShares(const std::vector<uint64_t>& kernelOfRank,
                                      const std::vector<std::array<uint64_t, 16>>& cpuMaskOfRank);

/// 64-bit FNV-1a, for names and identities (not for security).
uint64_t fnv1a(const void* data, size_t bytes, uint64_t seed = 0xcbf29ce484222325ull);

}  // namespace chorus
