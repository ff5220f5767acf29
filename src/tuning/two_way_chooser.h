// two_way_chooser.h — picks the faster of two ways of running a call, from the times of
// the calls themselves, per power-of-two size (and in place or not).
//
// Where no cache size, CPU model or probe tells in advance which of two ways wins, and the
// answer can change while a job runs (a VM's host moving the vCPUs), every call is timed,
// both ways are tried, the faster is used, and the other is tried again now and then (more
// rarely while it keeps losing, at once when two calls in a row of the chosen way slow down
// by a third) so a change is followed within a few calls; a change needs the other way 10%
// faster than the lower of the chosen way's last two calls in two tries in a row. On a
// machine where one way always wins the other costs one call in 1024 once settled. Pure
// logic (no clock): the caller times and reports. Used for the FIFO slots' stores
// (slot_stores.h) and for the copy path of same-host collectives (copy_path.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "src/core/bits.h"

namespace chorus {

/// `Way` is an enum of two values, 0 (tried first) and 1.
template <class Way>
class TwoWayChooser {
 public:
  static constexpr uint32_t kMinInterval = 32;    // calls between tries after a change
  static constexpr uint32_t kMaxInterval = 1024;  // ... once the other way keeps losing
  static constexpr double kSlowdown = 1.33;       // the chosen way this much slower: try again
  static constexpr double kMargin = 0.9;          // the other way must be this much faster
  static constexpr uint32_t kFirstTries = 2;      // calls each way before the first choice

  /// Always `w` from now on (an environment variable fixed the way): nothing is timed.
  void fix(Way w) {
    fixed_ = true;
    fixedWay_ = w;
  }

  /// Whether an environment variable fixed the way (fix).
  bool fixed() const { return fixed_; }

  /// Every size starts settled on `w`, as if `w` had won its first tries: no first tries of
  /// the other way, whose first try comes after kMaxInterval calls (a probe said it loses
  /// by far: copy_path.h). Each size's first counted call gives the reference a slowdown is
  /// judged against; a try that wins changes the way as usual.
  void presume(Way w) {
    for (Bucket& b : buckets_) {
      b.decided = true;
      b.best = w;
      b.last = w;
      b.tries[0] = b.tries[1] = kFirstTries;
      b.interval = b.untilTry = kMaxInterval;
    }
  }

  /// Where a way's first call after calls of the other way is slow for reasons that vanish
  /// on its next call (copy path: CMA reads inputs the FIFO's slots pushed out of the cache,
  /// the FIFO refills them), judge each way on calls in a row: the first call after a change
  /// of way is not counted and the next call keeps the way; the first tries go in blocks
  /// (way 0's, then way 1's) instead of in turn.
  void setWarmAfterSwitch(bool on) { warmAfterSwitch_ = on; }

  /// The way to use for the next call of `bytes` bytes (in place: output = input; those
  /// calls touch half the memory and are timed apart).
  Way choose(size_t bytes, bool inPlace = false) const {
    if (fixed_) return fixedWay_;
    const Bucket& b = buckets_[bucketOf(bytes, inPlace)];
    if (warmAfterSwitch_ && b.switched) return b.last;  // the counted call after a switch
    // First calls: the two ways in turn (or in blocks), way 0 first, kFirstTries each.
    if (!b.decided && warmAfterSwitch_) return b.tries[0] < kFirstTries ? Way(0) : Way(1);
    if (!b.decided) return b.tries[0] <= b.tries[1] ? Way(0) : Way(1);
    if (b.untilTry == 0) return other(b.best);
    return b.best;
  }

  /// The time of a call made the way choose() said. Returns true when the way this size
  /// uses from now on changed (the caller logs it).
  bool record(size_t bytes, bool inPlace, Way used, double ns) {
    if (fixed_ || !(ns > 0)) return false;
    Bucket& b = buckets_[bucketOf(bytes, inPlace)];
    if (!b.warm) {  // a size's first call pays first touches and checks: not counted
      b.warm = true;
      b.last = used;
      return false;
    }
    b.switched = warmAfterSwitch_ && used != b.last;
    b.last = used;
    if (b.switched) return false;  // the first call after a change of way: not counted
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
    const int t = static_cast<int>(Way(0));
    const int s = static_cast<int>(Way(1));
    if (b.tries[t] < kFirstTries || b.tries[s] < kFirstTries) return false;  // still trying
    const Way before = b.best;
    const bool first = !b.decided;
    if (first || used != b.best) {  // the first pair, or a try of the other way: decide
      if (first)
        b.best = b.ns[s] < b.ns[t] ? Way(1) : Way(0);
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
      return first ? b.best == Way(1) : b.best != before;
    }
    if (b.untilTry > 0) --b.untilTry;
    if (b.ref == 0) b.ref = e;  // presume(): the first counted call is the reference
    if (e > kSlowdown * b.ref) b.untilTry = 0;  // the chosen way slowed down: try the other
    return false;
  }

  /// How many calls after the one choose() just gave `w` for will surely go way `w` too,
  /// at most `cap`: 0 unless `w` is the settled way (decided, no try pending or being
  /// confirmed, not the counted call after a switch). A caller that runs those calls
  /// without timing them (single_copy.cc's FIFO lease) reports them with skipped().
  uint32_t runway(size_t bytes, bool inPlace, Way w, uint32_t cap) const {
    if (fixed_) return fixedWay_ == w ? cap : 0;
    const Bucket& b = buckets_[bucketOf(bytes, inPlace)];
    if (!b.warm || !b.decided || b.confirming || b.switched || b.best != w || b.untilTry < 2)
      return 0;
    return b.untilTry - 1 < cap ? b.untilTry - 1 : cap;
  }

  /// `n` calls of the chosen way ran untimed (at most what runway() said): the next try of
  /// the other way comes as many calls sooner, as if they had been recorded.
  void skipped(size_t bytes, bool inPlace, uint32_t n) {
    if (fixed_) return;
    Bucket& b = buckets_[bucketOf(bytes, inPlace)];
    b.untilTry = b.untilTry > n ? b.untilTry - n : 0;
  }

  /// A size's recent time per call each way (ns; 0 = not measured), for logs and tests.
  double ewmaNs(size_t bytes, bool inPlace, Way s) const {
    return buckets_[bucketOf(bytes, inPlace)].ns[static_cast<int>(s)];
  }

 private:
  struct Bucket {
    double ns[2] = {0, 0};       // recent time per call, each way
    double lastChosen = 0;       // the chosen way's last call (0: none since it was chosen)
    uint32_t tries[2] = {0, 0};  // calls each way before the first choice
    double ref = 0;              // the chosen way's figure when it was last chosen
    uint32_t interval = kMinInterval, untilTry = kMinInterval;
    Way best = Way(0);
    bool decided = false;
    bool warm = false;
    bool confirming = false;  // the last try won; the next call tries again
    Way last = Way(0);        // the way of the last call
    bool switched = false;    // warmAfterSwitch: the last call changed ways (not counted)
  };
  static Way other(Way s) { return s == Way(0) ? Way(1) : Way(0); }
  static size_t bucketOf(size_t bytes, bool inPlace) {  // log2 (a sweep's sizes apart) x 2
    const size_t b = static_cast<size_t>(floorLog2(bytes));
    return 2 * b + (inPlace ? 1 : 0);
  }

  bool fixed_ = false;
  Way fixedWay_ = Way(0);
  bool warmAfterSwitch_ = false;
  std::array<Bucket, 128> buckets_{};
};

/// One chooser per `Use` (an enum of N values from 0): collectives whose times and best ways
/// differ learn apart.
template <class Way, class Use, size_t N>
class TwoWayChoosers {
 public:
  void fix(Way w) {
    for (TwoWayChooser<Way>& c : by_) c.fix(w);
  }
  void presume(Way w) {
    for (TwoWayChooser<Way>& c : by_) c.presume(w);
  }
  void setWarmAfterSwitch(bool on) {
    for (TwoWayChooser<Way>& c : by_) c.setWarmAfterSwitch(on);
  }
  TwoWayChooser<Way>& operator[](Use u) { return by_[static_cast<size_t>(u)]; }
  const TwoWayChooser<Way>& operator[](Use u) const { return by_[static_cast<size_t>(u)]; }

 private:
  std::array<TwoWayChooser<Way>, N> by_{};
};

}  // namespace chorus
