// slot_stores.h — how the FIFO paths write the slots a peer reads next: with
// ordinary stores (the lines stay in this core's cache and the peer takes them from there)
// or with streaming stores (the lines go to memory and the peer reads them from there).
//
// Which one is faster depends on how far apart the two cores are, and on a VM that changes
// while a job runs: on the Zen 5 VM of docs/PERF.md ("Slot stores") the host moves the two
// vCPUs between cores that share an L3 (a cache line crosses in ~110 ns round trip) and
// cores on different dies (~530 ns) every few minutes. Sharing an L3, ordinary stores win
// (streaming ones 0.5-0.7x at 256 KiB-32 MiB); apart, every line the peer takes from this
// core's cache crosses the dies one at a time and streaming stores win 1.3-2x. No cache
// size or CPU model tells the two apart, so the choice is measured, per communicator, on
// the calls themselves: every call is timed, both ways are tried, the faster is used, and
// the other is tried again now and then (more rarely while it keeps losing, at once when
// two calls in a row of the chosen way slow down by a third) so a move of the vCPUs is
// followed within a few calls; a change needs the other way 10% faster than the lower of
// the chosen way's last two calls in two tries in a row. On a machine
// where one way always wins the other costs one call in 1024 once settled. Pure logic (no clock, no
// stores): the caller times and reports.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace chorus {

enum class SlotStores : uint8_t { Temporal = 0, Streaming = 1 };

inline const char* slotStoresName(SlotStores s) {
  return s == SlotStores::Streaming ? "streaming" : "temporal";
}

class SlotStoreChooser {
 public:
  enum class Mode : uint8_t { Auto, Temporal, Streaming };
  static constexpr uint32_t kMinInterval = 32;    // calls between tries after a change
  static constexpr uint32_t kMaxInterval = 1024;  // ... once the other way keeps losing
  static constexpr double kSlowdown = 1.33;       // the chosen way this much slower: try again
  static constexpr double kMargin = 0.9;          // the other way must be this much faster
  static constexpr uint32_t kFirstTries = 2;      // calls each way before the first choice

  void setMode(Mode m) { mode_ = m; }
  Mode mode() const { return mode_; }

  /// The way to use for the next call of `bytes` bytes (in place: output = input; those
  /// calls touch half the memory and are timed apart).
  SlotStores choose(size_t bytes, bool inPlace = false) const {
    if (mode_ == Mode::Temporal) return SlotStores::Temporal;
    if (mode_ == Mode::Streaming) return SlotStores::Streaming;
    const Bucket& b = buckets_[bucketOf(bytes, inPlace)];
    // First calls: the two ways in turn, the usual one first, kFirstTries each.
    if (!b.decided) return b.tries[0] <= b.tries[1] ? SlotStores::Temporal : SlotStores::Streaming;
    if (b.untilTry == 0) return other(b.best);
    return b.best;
  }

  /// The time of a call made the way choose() said. Returns true when the way this size
  /// uses from now on changed (the caller logs it).
  bool record(size_t bytes, bool inPlace, SlotStores used, double ns) {
    if (mode_ != Mode::Auto || !(ns > 0)) return false;
    Bucket& b = buckets_[bucketOf(bytes, inPlace)];
    if (!b.warm) {  // a size's first call pays first touches and checks: not counted
      b.warm = true;
      return false;
    }
    double& e = b.ns[static_cast<int>(used)];
    if (!b.decided) {
      // The first calls: the lower of each way's kFirstTries (a single first call each way
      // decided on one sample: slots touched for the first time, a preemption; measured,
      // all-to-all np 2 at 2 MiB settled on streaming in the fast window, 0.69x).
      e = e == 0 || ns < e ? ns : e;
      ++b.tries[static_cast<int>(used)];
    } else if (used != b.best) {
      e = ns;  // a try: the other way's figure is from long ago (another window, maybe)
    } else {
      // The chosen way: the lower of its last two calls. Noise only adds time, and one slow
      // call (a preemption; the peer's try of the other way, which slows this rank's calls
      // too, as every call waits for the peer) must neither trigger a try nor let a try
      // win against it: in a steady window, figures from single calls made two ranks trade
      // tries and change ways every few dozen calls. Two slow calls in a row count: a move
      // of the vCPUs shows within two calls.
      e = b.lastChosen > 0 && b.lastChosen < ns ? b.lastChosen : ns;
      b.lastChosen = ns;
    }
    const int t = static_cast<int>(SlotStores::Temporal);
    const int s = static_cast<int>(SlotStores::Streaming);
    if (b.tries[t] < kFirstTries || b.tries[s] < kFirstTries) return false;  // still trying
    const SlotStores before = b.best;
    const bool first = !b.decided;
    if (first || used != b.best) {  // the first pair, or a try of the other way: decide
      if (first)
        b.best = b.ns[s] < b.ns[t] ? SlotStores::Streaming : SlotStores::Temporal;
      else if (b.ns[static_cast<int>(other(b.best))] < kMargin * b.ns[static_cast<int>(b.best)]) {
        // The try won: one more try to confirm (one lucky call is not a change of window),
        // then change.
        if (!b.confirming) {
          b.confirming = true;
          b.untilTry = 0;
          return false;
        }
        b.best = other(b.best);
        b.lastChosen = ns;  // the winning try is the new way's last call
      }
      b.confirming = false;
      if (b.best != before || first)
        b.interval = kMinInterval;
      else
        b.interval = b.interval * 2 > kMaxInterval ? kMaxInterval : b.interval * 2;
      b.untilTry = b.interval;
      b.ref = b.ns[static_cast<int>(b.best)];
      b.decided = true;
      return first ? b.best == SlotStores::Streaming : b.best != before;
    }
    if (b.untilTry > 0) --b.untilTry;
    if (e > kSlowdown * b.ref) b.untilTry = 0;  // the chosen way slowed down: try the other
    return false;
  }

  /// A size's recent time per call each way (ns; 0 = not measured), for logs and tests.
  double ewmaNs(size_t bytes, bool inPlace, SlotStores s) const {
    return buckets_[bucketOf(bytes, inPlace)].ns[static_cast<int>(s)];
  }

 private:
  struct Bucket {
    double ns[2] = {0, 0};       // recent time per call, each way
    double lastChosen = 0;       // the chosen way's last call (0: none since it was chosen)
    uint32_t tries[2] = {0, 0};  // calls each way before the first choice
    double ref = 0;              // the chosen way's figure when it was last chosen
    uint32_t interval = kMinInterval, untilTry = kMinInterval;
    SlotStores best = SlotStores::Temporal;
    bool decided = false;
    bool warm = false;
    bool confirming = false;  // the last try won; the next call tries again
  };
  static SlotStores other(SlotStores s) {
    return s == SlotStores::Temporal ? SlotStores::Streaming : SlotStores::Temporal;
  }
  static size_t bucketOf(size_t bytes, bool inPlace) {  // log2 (a sweep's sizes apart) x 2
    size_t b = 0;
    while (b < 63 && (size_t{2} << b) <= bytes) ++b;
    return 2 * b + (inPlace ? 1 : 0);
  }

  Mode mode_ = Mode::Auto;
  std::array<Bucket, 128> buckets_{};
};

/// The collectives whose shared-memory FIFO paths choose their slot stores per call, each
/// with a chooser of its own (their times and their best ways differ).
enum class SlotStoreUse : uint8_t { AllReduce = 0, AllGather = 1, AllToAll = 2 };

class SlotStoreChoosers {
 public:
  void setMode(SlotStoreChooser::Mode m) {
    for (SlotStoreChooser& c : by_) c.setMode(m);
  }
  SlotStoreChooser& operator[](SlotStoreUse u) { return by_[static_cast<size_t>(u)]; }
  const SlotStoreChooser& operator[](SlotStoreUse u) const { return by_[static_cast<size_t>(u)]; }

 private:
  std::array<SlotStoreChooser, 3> by_{};
};

}  // namespace chorus
