// shrink.h — going on without lost ranks: the survivors agree which ranks failed
// (chorusCommFailedRanks) and hand each other a fresh unique id for a smaller communicator
// (chorusCommShrink), over the parent's bootstrap sockets only.
//
// Neither handshake needs the bootstrap root or the ring (either may have died with a
// rank). Each survivor talks to one leader: the lowest rank it believes alive (failed
// ranks) or not excluded (shrink), over the direct point-to-point bootstrap sockets. The
// leader decides and answers every survivor with the same reply, so every survivor returns
// the same list, or the same error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chorus.h"

struct chorusComm;

namespace chorus {

/// The handshakes' wire format (bootstrap point-to-point messages with tag kFtTag): an
/// FtHeader, then nranks bytes of mask (1 = failed / excluded). Non-leaders send their view;
/// the leader answers each with the decision (status, detail, id or the agreed mask).
constexpr int kFtTag = 0x5f7;
constexpr uint32_t kFtMagic = 0x43465431;  // "CFT1"
enum class FtKind : uint32_t { FailedRanks = 1, Shrink = 2 };
struct FtHeader {
  uint32_t magic;
  uint32_t kind;   // FtKind
  uint32_t round;  // the sender's comm->ftRound: stale messages (a lower round) are skipped
  int32_t status;  // chorusResult_t; anything but chorusSuccess carries `detail`
  chorusUniqueId id;
  char detail[256];
};

/// Collective over the ranks of `comm` that are alive: probes every other rank's bootstrap
/// listener (refused or unreachable within the timeout: failed), then agrees with the others
/// through the lowest live rank. `*failed` is sorted; on success it is also stored in
/// comm->failedRanks. The caller holds comm->ftMutex.
chorusResult_t failedRanksAgree(chorusComm* comm, std::vector<int>* failed);

struct ShrinkResult {
  int rank = 0;
  int nranks = 0;
  chorusUniqueId id{};
};

/// Collective over the survivors (the ranks of `comm` not in `excluded`, a mask of nranks
/// bytes). `localError` non-empty means this rank's own list was bad: it still tells the
/// leader (so every survivor fails at once instead of waiting for it) and then fails with
/// chorusInvalidArgument. Fails on every survivor when the survivors' lists differ. The
/// caller holds comm->ftMutex, has counted this call in comm->ftRound (every call that gets
/// past the handle checks counts, failed or not, so the survivors' rounds stay in step) and
/// no operation runs on comm.
chorusResult_t shrinkRendezvous(chorusComm* comm, const std::vector<uint8_t>& excluded,
                                const std::string& localError, ShrinkResult* out);

}  // namespace chorus
