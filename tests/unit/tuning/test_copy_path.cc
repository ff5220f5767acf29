// The copy-path chooser (src/tuning/copy_path.h: FIFO or CMA for same-host collectives)
// against made-up call times: a way's first call after a change of way is not counted, its
// first tries go in blocks, so a CMA that is slow only right after FIFO calls (inputs pushed
// out of the cache by the slots) still wins where its calls in a row are faster, while the
// slot-store chooser's calls in turn would have settled on the FIFO; it follows a later
// change of the faster way; each collective learns on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "src/tuning/copy_path.h"
#include "src/tuning/slot_stores.h"

namespace {

using chorus::CopyPath;
using chorus::CopyPathChooser;
using chorus::CopyPathChoosers;
using chorus::CopyPathUse;

constexpr size_t kMiB = 1 << 20;

// A cost model with memory: CMA costs `cmaCold` right after a FIFO call and `cmaWarm` after
// a CMA call; the FIFO always `fifo`.
struct Machine {
  double fifo, cmaWarm, cmaCold;
  CopyPath last = CopyPath::Fifo;
  double cost(CopyPath w) {
    const double t = w == CopyPath::Fifo ? fifo : (last == CopyPath::Cma ? cmaWarm : cmaCold);
    last = w;
    return t;
  }
};

template <class Chooser>
std::vector<CopyPath> run(Chooser& ch, Machine& m, size_t bytes, int calls) {
  std::vector<CopyPath> ways;
  for (int i = 0; i < calls; ++i) {
    const CopyPath w = ch.choose(bytes);
    ways.push_back(w);
    ch.record(bytes, false, w, m.cost(w));
  }
  return ways;
}

TEST(CopyPath, FirstTriesGoInBlocksAndTheFirstCallAfterASwitchIsNotCounted) {
  CopyPathChoosers chs;
  CopyPathChooser& ch = chs[CopyPathUse::AllGather];
  Machine m{100e3, 70e3, 140e3};
  const std::vector<CopyPath> ways = run(ch, m, 2 * kMiB, 6);
  const std::vector<CopyPath> want = {CopyPath::Fifo, CopyPath::Fifo, CopyPath::Fifo,
                                      CopyPath::Cma,  CopyPath::Cma,  CopyPath::Cma};
  EXPECT_EQ(ways, want);
  EXPECT_EQ(ch.choose(2 * kMiB), CopyPath::Cma);
  EXPECT_EQ(ch.ewmaNs(2 * kMiB, false, CopyPath::Cma), 70e3);  // the cold call not counted
  EXPECT_EQ(ch.ewmaNs(2 * kMiB, false, CopyPath::Fifo), 100e3);
}

TEST(CopyPath, ColdFirstCallsDoNotHideTheFasterPath) {
  // CMA runs 70 us in a row but 140 right after a FIFO call; the FIFO runs 100.
  Machine m{100e3, 70e3, 140e3};
  CopyPathChoosers chs;
  const std::vector<CopyPath> ways = run(chs[CopyPathUse::Broadcast], m, kMiB, 2000);
  int cma = 0;
  for (CopyPath w : ways) cma += w == CopyPath::Cma;
  EXPECT_EQ(ways.back(), CopyPath::Cma);
  EXPECT_GE(cma, 1900);
  // The same times through calls in turn (the slot-store chooser's way) settle on the
  // FIFO: every CMA call it counts came right after a FIFO call.
  chorus::TwoWayChooser<CopyPath> inTurn;
  Machine m2{100e3, 70e3, 140e3};
  const std::vector<CopyPath> turn = run(inTurn, m2, kMiB, 2000);
  EXPECT_EQ(turn.back(), CopyPath::Fifo);
}

TEST(CopyPath, FollowsAChangeOfTheFasterPath) {
  CopyPathChoosers chs;
  CopyPathChooser& ch = chs[CopyPathUse::AllToAll];
  Machine fast{100e3, 60e3, 90e3};
  run(ch, fast, 4 * kMiB, 300);
  ASSERT_EQ(ch.choose(4 * kMiB), CopyPath::Cma);
  // CMA slows to 2.5x the FIFO (the host moved the vCPUs, say): back to the FIFO within a
  // few dozen calls, and it stays there.
  Machine slow{100e3, 250e3, 250e3};
  slow.last = CopyPath::Cma;
  const std::vector<CopyPath> ways = run(ch, slow, 4 * kMiB, 400);
  size_t firstFifo = ways.size();
  for (size_t i = 0; i < ways.size(); ++i)
    if (ways[i] == CopyPath::Fifo) {
      firstFifo = i;
      break;
    }
  EXPECT_LE(firstFifo, 40u);
  EXPECT_EQ(ch.choose(4 * kMiB), CopyPath::Fifo);
  int cmaLate = 0;
  for (size_t i = 100; i < ways.size(); ++i) cmaLate += ways[i] == CopyPath::Cma;
  EXPECT_LE(cmaLate, 12) << "CMA tried too often once it lost";
}

TEST(CopyPath, EachCollectiveLearnsOnItsOwn) {
  CopyPathChoosers chs;
  Machine cmaWins{100e3, 50e3, 50e3}, fifoWins{50e3, 100e3, 100e3};
  run(chs[CopyPathUse::Gather], cmaWins, kMiB, 100);
  run(chs[CopyPathUse::Scatter], fifoWins, kMiB, 100);
  EXPECT_EQ(chs[CopyPathUse::Gather].choose(kMiB), CopyPath::Cma);
  EXPECT_EQ(chs[CopyPathUse::Scatter].choose(kMiB), CopyPath::Fifo);
  EXPECT_EQ(chs[CopyPathUse::AllGather].choose(kMiB), CopyPath::Fifo);  // no calls yet
}

// The FIFO lease (single_copy.cc): runway() says how many calls after this one surely go
// the settled way; reporting them as skipped() keeps the schedule of tries of the other way
// what it would have been had every call been timed.
TEST(CopyPath, RunwayIsZeroUntilSettledAndSkippedCallsBringTheNextTryCloser) {
  CopyPathChoosers chs;
  CopyPathChooser& ch = chs[CopyPathUse::Gather];
  Machine fifoWins{50e3, 100e3, 100e3};
  EXPECT_EQ(ch.runway(kMiB, false, CopyPath::Fifo, 63), 0u);  // nothing timed yet
  run(ch, fifoWins, kMiB, 4);  // warm-up, FIFO x2, the first CMA try (not counted)
  EXPECT_EQ(ch.runway(kMiB, false, CopyPath::Fifo, 63), 0u);  // not decided yet
  run(ch, fifoWins, kMiB, 4);                                 // CMA x2: the FIFO settled; FIFO x2
  const uint32_t r = ch.runway(kMiB, false, CopyPath::Fifo, 63);
  EXPECT_GT(r, 0u);
  EXPECT_LT(r, 32u);  // tries come back kMinInterval calls after a choice
  EXPECT_EQ(ch.runway(kMiB, false, CopyPath::Cma, 63), 0u);  // never for the losing way
  EXPECT_EQ(ch.runway(kMiB, true, CopyPath::Fifo, 63), 0u);  // in place learns apart
  EXPECT_LE(ch.runway(kMiB, false, CopyPath::Fifo, 5), 5u);  // capped
  // This call, then `r` untimed ones: the call after them is the next try of CMA.
  ASSERT_EQ(ch.choose(kMiB), CopyPath::Fifo);
  ch.record(kMiB, false, CopyPath::Fifo, fifoWins.cost(CopyPath::Fifo));
  ch.skipped(kMiB, false, r);
  EXPECT_EQ(ch.choose(kMiB), CopyPath::Cma);
  EXPECT_EQ(ch.runway(kMiB, false, CopyPath::Fifo, 63), 0u);
  // A fixed way: the whole cap for that way, nothing for the other.
  CopyPathChooser fixed;
  fixed.fix(CopyPath::Fifo);
  EXPECT_EQ(fixed.runway(kMiB, false, CopyPath::Fifo, 63), 63u);
  EXPECT_EQ(fixed.runway(kMiB, false, CopyPath::Cma, 63), 0u);
}

// Where the init probe found the kernel's copy far slower than a user copy (peer_mem.cc,
// kCmaHopeless), every size starts settled on the FIFO: no first tries of CMA, the FIFO lease
// runs from the first timed call, CMA is tried after kMaxInterval calls and still taken
// where it wins, and a FIFO that slows down by a third brings the try forward.
TEST(CopyPath, PresumedFifoSkipsTheFirstTriesButStillFindsAFasterCma) {
  CopyPathChoosers chs;
  chs.presume(CopyPath::Fifo);
  CopyPathChooser& ch = chs[CopyPathUse::AllGather];
  Machine cmaWins{100e3, 50e3, 50e3};
  const std::vector<CopyPath> first = run(ch, cmaWins, 16 * kMiB, 1000);
  EXPECT_EQ(std::count(first.begin(), first.end(), CopyPath::Cma), 0);
  EXPECT_GT(ch.runway(16 * kMiB, false, CopyPath::Fifo, 63), 0u);
  run(ch, cmaWins, 16 * kMiB, 40);  // the try after 1024 calls, its confirmation, the switch
  EXPECT_EQ(ch.choose(16 * kMiB), CopyPath::Cma);

  CopyPathChooser& g = chs[CopyPathUse::Gather];
  Machine fifoSlowsDown{100e3, 150e3, 150e3};
  run(g, fifoSlowsDown, kMiB, 10);
  EXPECT_EQ(g.choose(kMiB), CopyPath::Fifo);
  fifoSlowsDown.fifo = 200e3;  // two slow calls in a row: try CMA now
  const std::vector<CopyPath> after = run(g, fifoSlowsDown, kMiB, 3);
  EXPECT_EQ(std::count(after.begin(), after.end(), CopyPath::Cma), 1);
}

// CHORUS_CMA_MAX=auto's start (copyPathStart): timed where the init probe found the kernel's
// copy within 4x of a user copy; settled on the FIFO with rare tries beyond it; the FIFO only
// where, beyond it, the ranks outnumber the CPUs (a try would time turns on a CPU and can win
// on a lucky one). A chooser fixed that way never runs CMA, however fast CMA's calls read.
TEST(CopyPathStart, TheFifoOnlyWhereTheKernelsCopyIsHopelessAndRanksOutnumberTheCpus) {
  using chorus::CopyPathStart;
  using chorus::copyPathStart;
  EXPECT_EQ(copyPathStart(1.2, 2.0), CopyPathStart::Timed);  // Intel VM: CMA can win
  EXPECT_EQ(copyPathStart(3.99, 1.0), CopyPathStart::Timed);
  EXPECT_EQ(copyPathStart(0, 2.0), CopyPathStart::Timed);        // probe not taken
  EXPECT_EQ(copyPathStart(8.2, 1.0), CopyPathStart::FifoFirst);  // AMD VM, np 2
  EXPECT_EQ(copyPathStart(8.2, 0.5), CopyPathStart::FifoFirst);
  EXPECT_EQ(copyPathStart(8.2, 2.0), CopyPathStart::FifoOnly);  // AMD VM, np 4 on 2 CPUs
  EXPECT_EQ(copyPathStart(4.0, 1.5), CopyPathStart::FifoOnly);

  CopyPathChoosers chs;
  chs.fix(CopyPath::Fifo);
  Machine cmaWins{100e3, 50e3, 50e3};
  const std::vector<CopyPath> ways = run(chs[CopyPathUse::Broadcast], cmaWins, 32 * 1024, 3000);
  EXPECT_EQ(std::count(ways.begin(), ways.end(), CopyPath::Cma), 0);
}

}  // namespace
