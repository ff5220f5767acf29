/*
 * perf/common.h — the shared driver of the nccl-tests-style sweep binaries.
 *
 * Why it exists: every perf binary (one per collective) measures the same way and prints
 * the same table as NVIDIA's nccl-tests, so numbers can be read side by side with
 * published NCCL results and with the Open MPI peer binaries in perf/mpi/. The driver
 * knows nothing about Chorus or MPI: it talks to a small Backend interface (chorus_backend
 * or mpi_backend) and to a CollDesc that says how one collective sizes, fills, runs and
 * checks its buffers. One code path prints both tables, so a column never means two
 * different things.
 *
 * Flags follow nccl-tests: -b -e -f -i -n -w -c -o -d -r -z -a -m (see perfMain's usage).
 */
#ifndef CHORUS_PERF_COMMON_H_
#define CHORUS_PERF_COMMON_H_

#include <stddef.h>
#include <stdint.h>

#include <string>

namespace perf {

/// Element types, numbered like chorusDataType_t (and like nccl-tests' order).
enum DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kHalf = 6,
  kFloat = 7,
  kDouble = 8,
  kBfloat16 = 9,
  kNumTypes = 10
};

/// Reductions, numbered like chorusRedOp_t.
enum RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4, kNumOps = 5 };

size_t typeSize(DataType t);
const char* typeName(DataType t);
const char* opName(RedOp op);
bool isFloatType(DataType t);

/// What a perf binary measures through. Every call returns 0 on success; on failure it
/// returns non-zero and errorString() says what failed (for Chorus: the result string and
/// chorusGetLastError). Calls are collective exactly where the underlying library's are.
class Backend {
 public:
  virtual ~Backend() = default;

  /// Joins the job (reads the launcher's environment). Called once, before anything else.
  virtual int init(int* argc, char*** argv) = 0;
  /// -R 1 (as in nccl-tests): `bytes` of the library's own shareable memory, registered
  /// with the communicator (*handle for releaseRegistered). Returns 0, or 1 with
  /// errorString() set; backends without registration say so.
  virtual int allocRegistered(size_t bytes, void** ptr, void** handle) {
    (void)bytes, (void)ptr, (void)handle;
    return 1;
  }
  virtual int releaseRegistered(void* ptr, void* handle) {
    (void)ptr, (void)handle;
    return 1;
  }
  /// Short name printed in headers and CSV/JSON ("chorus", "mpi").
  virtual const char* name() const = 0;
  /// One line describing the library build (version), printed in the header.
  virtual std::string version() const = 0;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  /// Whether (type, op) can be measured; unsupported pairs are skipped by "-d all -o all".
  virtual bool supports(DataType t, RedOp op) const = 0;

  // --- collectives measured by the binaries -----------------------------------------
  virtual int allReduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op) = 0;
  // The others take the arguments and follow the in-place rules of include/chorus.h
  // (counts per rank, as chorusAllGather & co.).
  virtual int allGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType t) = 0;
  virtual int reduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType t,
                            RedOp op) = 0;
  virtual int broadcast(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) = 0;
  virtual int reduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op,
                     int root) = 0;
  virtual int allToAll(const void* sendbuf, void* recvbuf, size_t count, DataType t) = 0;
  virtual int scatter(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) = 0;
  virtual int gather(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) = 0;
  /// Sends count elements to sendPeer and receives count from recvPeer, concurrently
  /// (Chorus: a send and a recv inside one group; MPI: MPI_Sendrecv).
  virtual int sendRecv(const void* sendbuf, int sendPeer, void* recvbuf, int recvPeer, size_t count,
                       DataType t) = 0;
  /// The measured barrier (on the measurement stream, unlike the helper barrier()).
  virtual int barrierColl() = 0;
  /// Brackets the -m aggregated calls of one iteration (a no-op where there are no groups).
  virtual int groupStart() { return 0; }
  virtual int groupEnd() { return 0; }
  /// Waits for everything issued so far (stream backends); blocking backends return 0.
  virtual int sync() { return 0; }

  // --- helpers the driver itself needs ----------------------------------------------
  virtual int barrier() = 0;
  /// Every rank contributes `bytes` bytes; out receives nranks*bytes, rank r's at r*bytes.
  virtual int allGatherBytes(const void* in, void* out, size_t bytes) = 0;
  /// In-place reduction of n doubles across ranks (op: kSum, kMin or kMax).
  virtual int allReduceDoubles(double* values, int n, RedOp op) = 0;

  /// The detail of the last failure: never empty after a failed call.
  virtual std::string errorString() const = 0;
  /// Tears the job down after an error so that peers do not wait forever.
  virtual void abortJob() = 0;
  /// Orderly end of the job (collective).
  virtual int finalize() = 0;
};

/// Element counts for one size of one collective (nccl-tests' getCollByteCount).
struct CollCounts {
  size_t sendCount;          ///< elements in the send buffer
  size_t recvCount;          ///< elements in the receive buffer
  size_t paramCount;         ///< the count passed to the call
  size_t sendInplaceOffset;  ///< in-place: sendbuf = recvbuf + offset*rank (elements)
  size_t recvInplaceOffset;  ///< in-place: recvbuf = recvbuf + offset*rank (elements)
};

/// Everything a collective's fill/check/run functions need to know about one test.
struct CollArgs {
  Backend* backend;
  DataType type;
  RedOp op;
  int root;
  int rank;
  int nranks;
  CollCounts counts;
};

/// One collective, described by field name. The driver handles sizes, timing, output.
struct CollDesc {
  const char* name;  ///< binary name, e.g. "all_reduce_perf"
  bool usesOp;       ///< false: the redop column shows "none" and -o is ignored
  bool usesRoot;     ///< false: the root column shows -1
  void (*getCounts)(size_t bytes, size_t typeSize, int nranks, CollCounts* counts);
  /// Fills this rank's input (and anything the check needs) for the given placement.
  /// recvbuf is the base of the receive allocation; in-place inputs live inside it.
  void (*initData)(const CollArgs& args, void* sendbuf, void* recvbuf, bool inPlace);
  /// Runs the collective once on already-placed buffers.
  int (*run)(const CollArgs& args, const void* sendbuf, void* recvbuf);
  /// Counts wrong elements of this rank's result (recvbuf is the allocation base).
  size_t (*check)(const CollArgs& args, const void* sendbuf, const void* recvbuf, bool inPlace);
  /// Bandwidths in GB/s (1e9 B/s) from the measured seconds per call.
  void (*getBw)(size_t count, size_t typeSize, double sec, int nranks, double* algBw,
                double* busBw);
  /// true: the collective moves no data (barrier): one row per type, size and count 0.
  bool noData;
  /// true: the in-place variant is timed but never checked (#wrong N/A), because the
  /// call defines no in-place result (sendrecv with sendbuf == recvbuf, as in nccl-tests).
  bool inPlaceUnchecked;
};

/// Parses the command line, runs the sweep, prints the table on rank 0, finalizes the
/// backend. Returns the process exit status (0: all good, 1: wrong results, 2: error).
int perfMain(int argc, char** argv, const CollDesc& coll, Backend* backend);

// --- data patterns shared by the collectives' fill/check functions --------------------
//
// Inputs are small integers chosen so that every reduction over every rank is exactly
// representable in every type, whatever the order the library reduces in: |values| stay
// far below 127 (int8), 2048 (half) and 256 (bfloat16) for any partial result. prod uses
// values in {1, 2} (and -1 for signed types) with at most one 2 per element across all
// ranks, so products are in {±1, ±2}. Values repeat with a prime period (kPatternPeriod)
// so a chunk placed at the wrong offset shows up, and so references are cheap tables.

constexpr size_t kPatternPeriod = 8191;

/// Writes rank `rank`'s input pattern for elements [offset, offset+count) into buf.
void fillPattern(void* buf, size_t count, DataType t, RedOp op, int rank, int nranks,
                 size_t offset);
/// Counts elements of buf (count, starting at pattern index offset) that differ from the
/// reduction over all nranks ranks of their inputs. avg on float types is compared with
/// a tolerance of a few units in the last place (the library may scale before summing);
/// every other case must match bit for bit.
size_t countWrongReduced(const void* buf, size_t count, DataType t, RedOp op, int nranks,
                         size_t offset);
/// Counts elements of buf that differ from rank `rank`'s input pattern (for gathers and
/// for checking that a send buffer was left untouched).
size_t countWrongPattern(const void* buf, size_t count, DataType t, RedOp op, int rank, int nranks,
                         size_t offset);

/// Counts elements of buf, nranks blocks of `count` elements, where block i must be rank
/// i's input pattern starting at pattern index offset (gathers, all-to-all).
size_t countWrongBlocks(const void* buf, size_t count, DataType t, RedOp op, int nranks,
                        size_t offset);
/// Fills count elements with bytes no pattern value has, so an untouched output shows up.
void poison(void* buf, size_t count, DataType t);

/// The address of element `elems` of buf (elements of type t).
inline char* elemPtr(void* buf, size_t elems, DataType t) {
  return static_cast<char*>(buf) + elems * typeSize(t);
}
inline const char* elemPtr(const void* buf, size_t elems, DataType t) {
  return static_cast<const char*>(buf) + elems * typeSize(t);
}

/// algbw = bytes / sec (GB/s), busbw = algbw * factor (nccl-tests' *GetBw functions).
void setBw(double bytes, double sec, double factor, double* algBw, double* busBw);

/// The bandwidth of collectives that move one block per rank (all-gather, reduce-scatter,
/// all-to-all, scatter, gather): bytes = count * typeSize * nranks, factor (n-1)/n.
void getBwPerRankBlocks(size_t count, size_t typeSize, double sec, int nranks, double* algBw,
                        double* busBw);

/// initData of the gathering collectives: rank r fills its own pattern, in place at block r
/// of the receive buffer (which is poisoned first).
void initOwnBlock(const CollArgs& a, void* sendbuf, void* recvbuf, bool inPlace);

// --- float16 / bfloat16 helpers (round to nearest even), independent of the library ---
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBfloat16(float f);
float bfloat16ToFloat(uint16_t b);

}  // namespace perf

#endif  // CHORUS_PERF_COMMON_H_
