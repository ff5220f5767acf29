// perf/chorus_backend.cc — Backend implemented with the public Chorus C API.
#include "perf/chorus_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>

#include "chorus.h"
#include "perf/launch_init.h"

namespace perf {
namespace {

const chorusDataType_t kTypes[kNumTypes] = {
    chorusInt8,   chorusUint8,   chorusInt32,   chorusUint32,  chorusInt64,
    chorusUint64, chorusFloat16, chorusFloat32, chorusFloat64, chorusBfloat16};
const chorusRedOp_t kOps[kNumOps] = {chorusSum, chorusProd, chorusMax, chorusMin, chorusAvg};

class ChorusBackend : public Backend {
 public:
  ~ChorusBackend() override {
    if (stream_) chorusStreamDestroy(stream_);
    if (comm_) chorusCommDestroy(comm_);
  }

  int init(int* argc, char*** argv) override {
    const char* how = "";
    if (fail(launchInit(&comm_, argc, argv, &how), "Chorus init")) return 1;
    if (fail(chorusCommUserRank(comm_, &rank_), "chorusCommUserRank")) return 1;
    if (fail(chorusCommCount(comm_, &nranks_), "chorusCommCount")) return 1;
    const char* s = getenv("CHORUS_PERF_STREAM");
    if (s && strcmp(s, "host") == 0) {
      if (fail(chorusStreamCreate(&stream_), "chorusStreamCreate")) return 1;
    }
    int v = 0;
    if (chorusGetVersion(&v) == chorusSuccess) {
      char buf[64];
      snprintf(buf, sizeof buf, "%d.%d.%d%s", v / 10000, (v / 100) % 100, v % 100,
               stream_ ? " (host stream)" : "");
      version_ = buf;
    }
    return 0;
  }

  const char* name() const override { return "chorus"; }
  std::string version() const override { return version_; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  bool supports(DataType, RedOp) const override { return true; }

  int allReduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op) override {
    return fail(chorusAllReduce(sendbuf, recvbuf, count, kTypes[t], kOps[op], comm_, stream_),
                "chorusAllReduce");
  }
  int allGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType t) override {
    return fail(chorusAllGather(sendbuf, recvbuf, sendcount, kTypes[t], comm_, stream_),
                "chorusAllGather");
  }
  int reduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType t,
                    RedOp op) override {
    return fail(
        chorusReduceScatter(sendbuf, recvbuf, recvcount, kTypes[t], kOps[op], comm_, stream_),
        "chorusReduceScatter");
  }
  int broadcast(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    return fail(chorusBroadcast(sendbuf, recvbuf, count, kTypes[t], root, comm_, stream_),
                "chorusBroadcast");
  }
  int reduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op,
             int root) override {
    return fail(chorusReduce(sendbuf, recvbuf, count, kTypes[t], kOps[op], root, comm_, stream_),
                "chorusReduce");
  }
  int allToAll(const void* sendbuf, void* recvbuf, size_t count, DataType t) override {
    return fail(chorusAllToAll(sendbuf, recvbuf, count, kTypes[t], comm_, stream_),
                "chorusAllToAll");
  }
  int scatter(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    return fail(chorusScatter(sendbuf, recvbuf, count, kTypes[t], root, comm_, stream_),
                "chorusScatter");
  }
  int gather(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    return fail(chorusGather(sendbuf, recvbuf, count, kTypes[t], root, comm_, stream_),
                "chorusGather");
  }
  int sendRecv(const void* sendbuf, int sendPeer, void* recvbuf, int recvPeer, size_t count,
               DataType t) override {
    // Like nccl-tests: both inside one group, so the pair cannot deadlock.
    if (fail(chorusGroupStart(), "chorusGroupStart")) return 1;
    int bad = fail(chorusSend(sendbuf, count, kTypes[t], sendPeer, comm_, stream_), "chorusSend");
    if (!bad)
      bad = fail(chorusRecv(recvbuf, count, kTypes[t], recvPeer, comm_, stream_), "chorusRecv");
    chorusResult_t end = chorusGroupEnd();  // always close the group
    return bad ? 1 : fail(end, "chorusGroupEnd");
  }
  int barrierColl() override { return fail(chorusBarrier(comm_, stream_), "chorusBarrier"); }
  int groupStart() override { return fail(chorusGroupStart(), "chorusGroupStart"); }
  int groupEnd() override { return fail(chorusGroupEnd(), "chorusGroupEnd"); }
  int sync() override {
    return stream_ ? fail(chorusStreamSynchronize(stream_), "chorusStreamSynchronize") : 0;
  }

  int barrier() override { return fail(chorusBarrier(comm_, nullptr), "chorusBarrier"); }
  int allGatherBytes(const void* in, void* out, size_t bytes) override {
    return fail(chorusAllGather(in, out, bytes, chorusUint8, comm_, nullptr), "chorusAllGather");
  }
  int allReduceDoubles(double* values, int n, RedOp op) override {
    return fail(chorusAllReduce(values, values, static_cast<size_t>(n), chorusFloat64, kOps[op],
                                comm_, nullptr),
                "chorusAllReduce(double)");
  }

  int allocRegistered(size_t bytes, void** ptr, void** handle) override {
    if (fail(chorusMemAlloc(ptr, bytes), "chorusMemAlloc")) return 1;
    if (fail(chorusCommRegister(comm_, *ptr, bytes, handle), "chorusCommRegister")) {
      chorusMemFree(*ptr);
      *ptr = nullptr;
      return 1;
    }
    return 0;
  }
  int releaseRegistered(void* ptr, void* handle) override {
    if (fail(chorusCommDeregister(comm_, handle), "chorusCommDeregister")) return 1;
    return fail(chorusMemFree(ptr), "chorusMemFree");
  }

  std::string errorString() const override { return error_; }
  void abortJob() override {
    if (comm_) {
      chorusCommAbort(comm_);
      comm_ = nullptr;
    }
  }
  int finalize() override {
    if (stream_) {
      if (fail(chorusStreamDestroy(stream_), "chorusStreamDestroy")) return 1;
      stream_ = nullptr;
    }
    if (fail(chorusCommFinalize(comm_), "chorusCommFinalize")) return 1;
    chorusComm_t c = comm_;
    comm_ = nullptr;
    const int r = fail(chorusCommDestroy(c), "chorusCommDestroy");
    launchFinalize();
    return r;
  }

 private:
  // Records the failure (result string + the communicator's detail); returns 1 if failed.
  int fail(chorusResult_t res, const char* call) {
    if (res == chorusSuccess) return 0;
    const char* detail = chorusGetLastError(comm_);
    error_ = std::string(call) + ": " + chorusGetErrorString(res) + " (" + std::to_string(res) +
             ")" + (detail && *detail ? std::string(": ") + detail : std::string());
    return 1;
  }

  chorusComm_t comm_ = nullptr;
  chorusStream_t stream_ = nullptr;
  int rank_ = 0;
  int nranks_ = 1;
  std::string version_ = "?";
  std::string error_;
};

}  // namespace

Backend* makeChorusBackend() { return new ChorusBackend(); }

}  // namespace perf
