// flight_recorder.h — the last N operations of one communicator, for post-mortems.
//
// A hang in a collective library is almost never where it shows: the ranks that time out
// are the innocent ones, waiting for a rank that skipped a call, called another
// collective, or died. Each communicator therefore keeps a ring of its last
// CHORUS_FLIGHT_RECORDER_SIZE operations (what was called, its sequence number, its state,
// when it was queued and started, when it failed, and for an operation that is waiting, the
// peer it waits on). With CHORUS_FLIGHT_RECORDER_DIR set, every rank writes its ring to a
// JSON file when one of its operations times out or fails on a peer, and when the
// communicator is finalized, destroyed or aborted; tools/chorus-hang-report reads the files
// of all ranks and names the culprit.
//
// Cost: the ring is written by the thread that runs the operation; every field is a
// relaxed atomic (a plain store on x86) in one cache line per operation, so a dump from
// another thread (abort) reads it without a lock and without a data race. A blocking
// collective writes its entry once, already started with its sequence number (begin: eight
// stores), and reads the coarse monotonic clock once (~3-4 ns); its end stores the state and
// no time unless it failed: a second clock read cost up to 7% of a 512 B call (docs/PERF.md,
// issue 38 helper small2). Per primitive step, one relaxed store (the peer about to be
// waited on). Size 0 turns all of it into one branch.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "chorus.h"

struct chorusComm;

namespace chorus {

enum class FrState : int32_t { Enqueued = 0, Started = 1, Completed = 2, Failed = 3 };

/// One operation as read back from the ring (a plain copy, for dumps and tests).
struct FrRecord {
  uint64_t id = 0;  ///< 1, 2, ... in enqueue order on this rank
  uint64_t seq =
      0;  ///< collective sequence number (#1, #2...) or p2p sequence number; 0 before it starts
  int coll = 0;        ///< a Coll value
  int type = 0;        ///< chorusDataType_t
  int op = -1;         ///< chorusRedOp_t for reductions, else -1
  int root = -1;       ///< root, or peer for send/recv; -1 when unused
  uint64_t count = 0;  ///< elements, as the user passed it
  FrState state = FrState::Enqueued;
  int result = chorusSuccess;
  int waitPeer = -1;      ///< last peer this operation waited on (-1: none yet)
  bool waitSend = false;  ///< it waited for buffer space at waitPeer (else for data from it)
  int64_t tEnqueueNs = 0, tStartNs = 0;  ///< CLOCK_MONOTONIC_COARSE; 0: not yet
  int64_t tEndNs = 0;  ///< when it failed (Failed only; 0 for Completed: an end is not timed)
};

class FlightRecorder {
 public:
  /// `capacity` is rounded up to a power of two; 0 disables the recorder.
  explicit FlightRecorder(size_t capacity);

  size_t capacity() const { return cap_; }

  /// Records a new operation in state Enqueued; returns its id (0 when disabled).
  /// `startsNow`: it will start right away on this thread (a blocking call), so its start
  /// time is its enqueue time and start() need not read the clock again.
  uint64_t enqueue(int coll, int type, size_t count, int op, int root, bool startsNow = false);
  /// Records a blocking collective that starts now with sequence number `seq`: enqueue and
  /// start in one write of the entry (state Started) and one read of the clock.
  uint64_t begin(int coll, int type, size_t count, int op, int root, uint64_t seq);
  /// The operation starts with sequence number `seq`.
  void start(uint64_t id, uint64_t seq);
  /// The operation ended: Completed on success, Failed (with the time) otherwise. Only the
  /// first call for an id counts.
  void finish(uint64_t id, chorusResult_t r);
  /// Notes which peer the operation waits on (used when a wait fails).
  void noteWait(uint64_t id, int peer, bool send);
  /// Where Prims writes the peer it is about to wait on: (peer << 1) | send. Never null
  /// (a dummy for id 0 or an overwritten record).
  std::atomic<int32_t>* waitSlot(uint64_t id);

  /// The records still in the ring, oldest first.
  std::vector<FrRecord> snapshot() const;

  /// Writes the ring of `comm` to `<dir>/chorus-fr-<commhash>-rank<R>.json` (atomically,
  /// through a temporary file and rename). `reason` says why. No-op when dir is empty or
  /// the recorder is disabled. `detail` (may be null) is the error that caused the dump;
  /// without one, the communicator's last error is written. Returns the path written ("" when
  /// none).
  std::string dump(const chorusComm* comm, const std::string& dir, const char* reason,
                   const char* detail = nullptr);

 private:
  // One cache line per operation. `meta` packs coll | type << 8 | (state | flags) << 16 |
  // result << 24 | op << 32 (only the thread running the operation changes it, so a load and
  // a store suffice). A blocking collective stores 8 fields (begin): tStart only when the
  // start came after the record (a flag in meta says which), tEnd only for a failure.
  struct alignas(64) Entry {
    std::atomic<uint64_t> id{0};
    std::atomic<uint64_t> seq{0};
    std::atomic<uint64_t> count{0};
    std::atomic<int64_t> tEnq{0}, tStart{0}, tEnd{0};
    std::atomic<uint64_t> meta{0};
    std::atomic<int32_t> root{-1}, wait{-1};
  };
  static_assert(sizeof(Entry) == 64, "one cache line per entry");
  /// enqueue and begin: one entry written whole, sequence number `seq` (0: not yet), in
  /// `state`; `startsNow`: its start time is its record time (the kStartAtEnqueue flag).
  uint64_t record(int coll, int type, size_t count, int op, int root, uint64_t seq, FrState state,
                  bool startsNow);
  Entry* entry(uint64_t id) {
    if (id == 0) return nullptr;
    Entry* e = &ring_[(id - 1) & mask_];
    return e->id.load(std::memory_order_relaxed) == id ? e : nullptr;
  }

  const size_t cap_;  // a power of two (or 0)
  const size_t mask_;
  std::unique_ptr<Entry[]> ring_;
  std::atomic<uint64_t> next_{0};
  std::atomic<int32_t> dummyWait_{-1};
  std::mutex dumpMutex_;  // one dump at a time (a timeout and an abort may race)
};

/// Name of a Coll value as the dumps and messages spell it ("all_reduce", "send"...).
const char* frCollName(int coll);
/// "float32", "sum", "avg", "premulsum(5)"...
const char* frTypeName(int type);
std::string frOpName(int op);

/// Dumps comm's recorder to CHORUS_FLIGHT_RECORDER_DIR when it is set, and logs where
/// (at WARN when `loud`: after a failure; at INFO for routine dumps such as destroy).
void frDumpIfConfigured(const chorusComm* comm, const char* reason, bool loud,
                        const char* detail = nullptr);

}  // namespace chorus
