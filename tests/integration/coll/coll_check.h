// coll_check.h — one checker for every collective, shared by the thread-rank gtest suite
// (test_coll_threads.cc) and the multi-process program (coll_proc_main.cc).
//
// For one case (collective, datatype, op, count, root, in-place, pattern seed) and one
// rank, a CaseRun
//   * allocates its buffers with guard regions before and after each of them,
//   * fills the inputs with a deterministic pattern (a pure function of rank, element
//     index and seed, so every rank can compute what every other rank sent),
//   * issues the call (launch), and afterwards (verify)
//   * computes the expected output independently of the library (wide integer / double
//     arithmetic, its own round-to-nearest-even float16/bfloat16 conversions), compares
//     element by element, checks the guard regions, checks that every byte outside the
//     output range (the send buffer of an out-of-place call, the other blocks of an
//     in-place reduce-scatter / scatter buffer, an ignored off-root buffer) is unchanged.
//
// Input patterns for the reducing collectives are chosen so that the exact result is
// representable in every type, whatever the order of the reduction:
//   sum/avg/min/max/premulsum: small integers in [-7, 7] (unsigned types: [0, 14]);
//     the 8-rank sum is at most 56 in magnitude (112 unsigned), the pre-multiplied sum
//     (scalar 2) at most 112 (224 unsigned): exact in int8/uint8 and in bfloat16
//     (integers up to 256 are exact there).
//   prod: values in {1, 2} (signed types also -1, -2) with at most two 2s per element
//     across 8 ranks, so |product| <= 4.
// avg: integer types expect the truncating division of the exact sum. Float types: for a
// power-of-two rank count x*(1/n) and all partial sums are exact, so the comparison is
// exact; for n = 3 and 5, 1/n is not representable, so the result is compared with a
// tolerance of 2*(n+3) unit roundoffs of the type times sum(|x_i|)/n (a forward error
// bound for n products and n-1 additions, each rounded once in the type).
// Float min/max/sum/prod/avg/premulsum also get "nan" cases: one rank holds NaN at every
// index i with i % 5 == 2, and the result must be NaN exactly there.
//
// Non-reducing collectives (broadcast, all-gather, scatter, gather, all-to-all, send/recv)
// move bytes: inputs are a per-rank hash of the byte index, compared byte for byte.
#pragma once

#include <chorus.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace collcheck {

enum class Coll : int {
  AllReduce,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  Scatter,
  Gather,
  AllToAll,
  SendRecv,
  Barrier,
  kCount
};

enum class Op : int { Sum, Prod, Max, Min, Avg, PreMulSum, kCount };

// Point-to-point patterns (Coll::SendRecv).
enum class P2P : int {
  Ring,           // in a group: send to rank+1, receive from rank-1 (n = 1: self-send)
  RingUngrouped,  // no group: even ranks send then receive, odd ranks the reverse (n >= 2)
  Pairwise,       // in one group: send a distinct block to every rank (self included) and
                  // receive one from every rank: several peers per rank, plus self-send
  Self,           // in a group: send to and receive from oneself
  MultiSamePeer,  // in one group: two messages to rank+1 and two from rank-1, receives
                  // posted first; they must match in posting order
  kCount
};

const char* collName(Coll c);
const char* opName(Op o);
const char* typeName(chorusDataType_t t);
const char* p2pName(P2P p);
bool parseColl(const std::string& s, Coll* out);
bool parseOp(const std::string& s, Op* out);
bool parseType(const std::string& s, chorusDataType_t* out);
size_t typeSize(chorusDataType_t t);
bool isFloatType(chorusDataType_t t);
bool isReducing(Coll c);  // all_reduce, reduce, reduce_scatter
bool hasRoot(Coll c);     // broadcast, reduce, scatter, gather

// The ten types of the API, and the seven named by the acceptance matrix.
extern const std::vector<chorusDataType_t> kAllTypes;
extern const std::vector<chorusDataType_t> kMatrixTypes;
extern const std::vector<Op> kAllOps;
// The collectives in the matrix, in suite order.
extern const std::vector<Coll> kAllColls;

constexpr size_t kBigCount = (size_t(1) << 20) + 3;  // "1 Mi + 3" elements

struct Case {
  Coll coll = Coll::AllReduce;
  chorusDataType_t type = chorusFloat32;
  Op op = Op::Sum;   // reducing collectives only
  size_t count = 0;  // the API's count argument (per-rank block for gather-likes)
  int root = 0;      // rooted collectives only
  bool inplace = false;
  bool nan = false;           // float reducing collectives: inject NaNs on one rank
  P2P p2p = P2P::Ring;        // SendRecv only
  bool timedBarrier = false;  // Barrier only: one rank enters 100 ms late, others must wait
  uint32_t seed = 1;          // varies the data pattern from case to case
};

std::string describe(const Case& c);

// Which cases a (collective, nranks) runs. Every rank builds the same list in the same
// order. See buildCases() in coll_check.cc for the exact coverage; in short:
//   * "small" sizes: every type x every op x every size x {out-of-place, in-place};
//     rooted reducing (reduce): the root rotates with the case index, so each (type,op)
//     group of 8 consecutive cases visits every root (n <= 8); non-reducing rooted
//     collectives: every root for every (type, size, in-place).
//   * mid size (midSizes, default 100003 elements): every type once, op and in-place
//     rotating with (typeIndex + k), root (typeIndex + k) % n; send/recv: every type once,
//     pattern rotating.
//   * big size (kBigCount elements), BigMode::Subset: reducing collectives run 7 cases
//     per nranks, one per matrix type, with op = ops[(typeIndex + k + 3*rotation) % 6]
//     where k is the index of nranks in {1,2,3,4,5,8}: over the six rank counts every
//     (type, op) pair runs exactly once at the big size in each suite; in-place iff
//     (typeIndex + rotation) is odd, so the thread suite (rotation 0) and the process
//     suite (rotation 1) together run every (type, op) at 1 Mi + 3 both in-place and
//     out-of-place, at two different rank counts. Non-reducing collectives run 2 big cases
//     per nranks: out-of-place with type kMatrixTypes[(2k + rotation) % 7], in-place with
//     [(2k + 1 - rotation) % 7] (the 12 slots over six rank counts cover all 7 types),
//     root (k + typeIndex) % n; send/recv runs Ring and Pairwise the same way.
//   * BigMode::All: every (type, op, in-place) at the big size as well (slow).
enum class BigMode { None, Subset, All };

struct MatrixOptions {
  std::vector<chorusDataType_t> types = kAllTypes;
  std::vector<Op> ops = kAllOps;
  std::vector<size_t> sizes = {0, 1, 7, 1023};
  BigMode big = BigMode::Subset;
  size_t bigCount = kBigCount;
  bool nanCases = true;
  bool inplace = true;     // also run in-place variants
  bool outOfPlace = true;  // also run out-of-place variants
  // A size between the small ones and 1 Mi + 3 (several pipeline pieces, past the
  // small-message protocol): every type once per (collective, nranks), with the op
  // rotating like the big subset and in-place alternating.
  std::vector<size_t> midSizes = {100003};
  // 0 (thread suite) or 1 (process suite): which half of the big-size (type, op, in-place)
  // combinations this suite runs; the two suites together cover each (type, op) at 1 Mi + 3
  // twice, once in-place and once out-of-place, at two different rank counts.
  int rotation = 0;
};

std::vector<Case> buildCases(Coll coll, int nranks, const MatrixOptions& opts);

// From now on every case's buffers (guards included) come from chorusMemAlloc and are
// registered on the case's communicator (chorusCommRegister) until the case ends, so the
// collectives take the registered single-copy path where it applies.
void setRegisteredBuffers(bool on);

// One rank's share of one case. prepare() allocates and fills, launch() issues the call
// (several CaseRuns may be launched on one stream, or inside one group, before any is
// verified), verify() compares everything once the call has completed.
class CaseRun {
 public:
  CaseRun(const Case& c, chorusComm_t comm);
  ~CaseRun();
  CaseRun(const CaseRun&) = delete;
  CaseRun& operator=(const CaseRun&) = delete;

  // False (and *err) when the case cannot be set up (comm queries or PreMulSum creation
  // failed).
  bool prepare(std::string* err);
  // Issues the call(s). Returns the first non-success result.
  chorusResult_t launch(chorusStream_t stream);
  // Compares; on failure *err holds a readable description of the first mismatches.
  bool verify(std::string* err);

  const Case& theCase() const { return c_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // The prefix "[<case> nranks=N rank=R]" used in every message.
  std::string header() const;

  struct Impl;

 private:
  Case c_;
  chorusComm_t comm_;
  int rank_ = -1;
  int nranks_ = 0;
  std::unique_ptr<Impl> impl_;
};

// After a call of `c` on `comm` completed: the library's record of its plan and of what ran
// (src/api/test_hooks.h) agree, and a forced CHORUS_ALGO / CHORUS_PROTO (one name) ran, or
// fell back only where it cannot run the call (see coll_check.cc). runCase calls it.
bool checkPlanRan(const Case& c, chorusComm_t comm, int nranks, std::string* err);
/// Calls checkPlanRan saw run on the shared boards (src/algorithms/board.cc) in this process,
/// by collective (all_gather, all_reduce): what coll_proc_main --expect-board asks for.
size_t boardRunsSeen(Coll c);
/// Calls checkPlanRan saw run by halving on the pair cells (src/algorithms/pair_halving.cc):
/// what coll_proc_main --expect-pair-halving asks for.
size_t pairHalvingRunsSeen();

// prepare + launch (with stream: then chorusStreamSynchronize) + verify + checkPlanRan.
// A call that returns an error is reported with chorusGetErrorString and
// chorusGetLastError; *callFailed tells the caller the ranks may now be out of step.
bool runCase(const Case& c, chorusComm_t comm, chorusStream_t stream, std::string* err,
             bool* callFailed);

struct RunStats {
  size_t cases = 0;                   // cases run
  size_t failed = 0;                  // cases that failed
  bool stopped = false;               // a call returned an error: the remaining cases were not run
  std::vector<std::string> messages;  // the first maxMessages failure messages
  double seconds = 0;
};

// Runs `cases` in order on this rank. Stops at the first case whose call returns an
// error (the other ranks then run into the library's timeout rather than a mismatch).
RunStats runCases(const std::vector<Case>& cases, chorusComm_t comm, size_t maxMessages);

// Composite per-rank checks shared by both suites (collective over comm).
// chorusCommSplit with even/odd colors, reversed keys and (n >= 3) the last rank
// CHORUS_SPLIT_NOCOLOR; checks new sizes/ranks, runs all-reduce/broadcast/all-gather on the
// new communicators; then a split with one color and equal keys.
bool runSplitCheck(chorusComm_t comm, std::string* err);
// A host stream: a batch of different collectives queued on it, chorusStreamSynchronize,
// chorusStreamQuery, results checked; two dependent in-place all-reduces; 64 queued
// small all-reduces.
bool runStreamCheck(chorusComm_t comm, std::string* err);

// Float conversions written here, independent of the library: round to nearest even,
// subnormals, overflow to infinity, NaN kept NaN.
uint16_t doubleToHalf(double x);
double halfToDouble(uint16_t h);
uint16_t doubleToBf16(double x);
double bf16ToDouble(uint16_t h);

// Wall clock seconds (steady clock).
double nowSeconds();

}  // namespace collcheck
