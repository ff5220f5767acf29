// ordered_chooser.h — picks among the rank-order schedules of a reproducible all-reduce
// across hosts (orderedAllReduceWays, ordered_plan.cc) from the calls' own times, per
// power-of-two size.
//
// Every schedule it picks among adds each element's operands in rank order, so the choice
// never changes a bit of the result; but every rank must run the same schedule in a call,
// or the call waits for messages nobody sends. So the choice follows one rank's times
// (the decider, rank 0) and reaches the others in a small message, and everything else
// is a function of the calls' count, the same on every rank:
//   - a size's first calls try each way in turn, kBlock calls each (the lower of the
//     block's times but the first counts: a block's first call runs while the ranks are
//     still out of step from the way before, ahead of or behind rank 0, so it may take
//     more or less than the way's own time; on 2 hosts x 2 ranks with each host's ranks on
//     one CPU, counting it chose worse ways at 32-64 KiB);
//   - then the decider's choice (its Decision: the way, how many calls until the next try,
//     which way that tries) goes out at the start of the next call (syncDue), and every rank
//     applies it;
//   - each try is kBlock calls of another way, in turn, after `interval` calls of the
//     chosen way (kMinInterval after a change, doubling while the chosen way keeps
//     winning, up to kMaxInterval); the call after a try starts with the decider's next
//     Decision. A try wins where its lower call is kMargin of the chosen way's lower of its
//     last two calls.
// So a size costs one small message every interval + kBlock calls once settled, and a
// losing way kBlock calls in kMaxInterval. Pure logic (no clock, no messages): the caller
// times, sends and applies (src/algorithms/ordered.cc, orderedRunChosen).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "src/core/bits.h"

namespace chorus {

class OrderedWayChooser {
 public:
  static constexpr int kMaxWays = 8;
  static constexpr uint32_t kBlock = 3;          // calls of a way per try (the first not counted)
  static constexpr uint32_t kMinInterval = 32;   // calls of the chosen way between tries
  static constexpr uint32_t kMaxInterval = 512;  // ... while it keeps winning
  static constexpr double kMargin = 0.9;         // a try must be this much faster

  /// What the decider sends: the way to use, the calls of it before the next try, and the
  /// way that try takes (indices into the size's ways).
  struct Decision {
    uint32_t best = 0;
    uint32_t interval = kMinInterval;
    uint32_t tryWay = 0;
  };

  /// Whether the next call of `bytes` starts with the decider's Decision (every rank:
  /// the decider sends decide()'s, the others receive it; then every rank apply()s it).
  bool syncDue(size_t bytes) const { return buckets_[bucketOf(bytes)].phase == Phase::Sync; }

  /// The way (index) the next call of `bytes` takes (after any due Decision was applied).
  int way(size_t bytes) const {
    const Bucket& b = buckets_[bucketOf(bytes)];
    switch (b.phase) {
      case Phase::Explore: return static_cast<int>(b.idx);
      case Phase::Trying: return static_cast<int>(b.tryWay);
      default: return static_cast<int>(b.best);
    }
  }

  /// The decider: its choice from its figures, for a size whose Decision is due.
  Decision decide(size_t bytes, int nways) const {
    const Bucket& b = buckets_[bucketOf(bytes)];
    const uint32_t n = nways < 1 ? 1u : static_cast<uint32_t>(nways);
    Decision d;
    if (!b.decided) {
      for (uint32_t w = 1; w < n; ++w)
        if (b.ns[w] > 0 && (b.ns[d.best] <= 0 || b.ns[w] < b.ns[d.best])) d.best = w;
      d.interval = kMinInterval;
    } else {
      d.best = b.best < n ? b.best : 0;
      d.interval = b.interval * 2 > kMaxInterval ? kMaxInterval : b.interval * 2;
      if (b.tryWay < n && b.ns[b.tryWay] > 0 && b.ns[b.best] > 0 &&
          b.ns[b.tryWay] < kMargin * b.ns[b.best]) {
        d.best = b.tryWay;
        d.interval = kMinInterval;
      }
    }
    // The next try: the way after the last one tried (after the chosen one at first), in
    // turn, never the chosen one.
    uint32_t t = b.decided ? b.tryWay : d.best;
    for (uint32_t i = 0; i < n; ++i) {
      t = (t + 1) % n;
      if (t != d.best) break;
    }
    d.tryWay = t;
    return d;
  }

  /// Every rank, at a due sync: the Decision (the decider's own or the one it received).
  /// Returns whether the chosen way changed (or was chosen for the first time).
  bool apply(size_t bytes, const Decision& d, int nways) {
    Bucket& b = buckets_[bucketOf(bytes)];
    const uint32_t n = nways < 1 ? 1u : static_cast<uint32_t>(nways);
    const bool changed = !b.decided || d.best != b.best;
    b.best = d.best < n ? d.best : 0;
    b.tryWay = d.tryWay < n ? d.tryWay : 0;
    b.interval = d.interval < 1 ? 1 : d.interval;
    b.untilTry = b.interval;
    b.decided = true;
    b.lastBest = 0;
    b.phase = Phase::Settled;
    return changed;
  }

  /// The decider, after a call that took way `w` (ns: its time).
  void record(size_t bytes, int w, double ns) {
    Bucket& b = buckets_[bucketOf(bytes)];
    if (!(ns > 0) || w < 0 || w >= kMaxWays) return;
    double& e = b.ns[w];
    if (b.phase == Phase::Settled && static_cast<uint32_t>(w) == b.best) {
      // The chosen way: the lower of its last two calls (one slow call, a preemption,
      // neither makes a try win nor counts against it).
      e = b.lastBest > 0 && b.lastBest < ns ? b.lastBest : ns;
      b.lastBest = ns;
      return;
    }
    // A block (the first tries, or a try): the lower of its calls after the first, fresh
    // for each block.
    if (b.inBlock == 0) return;
    if (b.inBlock == 1 || e <= 0 || ns < e) e = ns;
  }

  /// Every rank, after each call of `bytes` (nways: the size's ways, the same on every rank).
  void advance(size_t bytes, int nways) {
    Bucket& b = buckets_[bucketOf(bytes)];
    switch (b.phase) {
      case Phase::Explore:
        if (++b.inBlock < kBlock) break;
        b.inBlock = 0;
        if (++b.idx >= static_cast<uint32_t>(nways)) b.phase = Phase::Sync;
        break;
      case Phase::Settled:
        if (b.untilTry > 0) --b.untilTry;
        if (b.untilTry == 0 && nways > 1) {
          b.phase = Phase::Trying;
          b.inBlock = 0;
        }
        break;
      case Phase::Trying:
        if (++b.inBlock >= kBlock) {
          b.inBlock = 0;
          b.phase = Phase::Sync;
        }
        break;
      case Phase::Sync: break;  // (a call ran without its Decision: not by this API's users)
    }
  }

  /// A size's latest figure for way `w` (ns; 0: none), for logs and tests.
  double figure(size_t bytes, int w) const {
    return w >= 0 && w < kMaxWays ? buckets_[bucketOf(bytes)].ns[w] : 0;
  }
  /// Whether the size has had its first Decision.
  bool decided(size_t bytes) const { return buckets_[bucketOf(bytes)].decided; }

 private:
  enum class Phase : uint8_t { Explore, Settled, Trying, Sync };
  struct Bucket {
    std::array<double, kMaxWays> ns{};  // each way's latest figure
    double lastBest = 0;                // the chosen way's last call since the Decision
    uint32_t idx = 0;                   // Explore: the way being tried
    uint32_t inBlock = 0;               // calls of the current block so far
    uint32_t best = 0, tryWay = 0;
    uint32_t interval = kMinInterval, untilTry = 0;
    bool decided = false;
    Phase phase = Phase::Explore;
  };
  static size_t bucketOf(size_t bytes) {  // log2: a sweep's sizes apart; in place or not alike
    return bytes == 0 ? 0 : static_cast<size_t>(floorLog2(bytes));
  }
  std::array<Bucket, 64> buckets_{};
};

}  // namespace chorus
