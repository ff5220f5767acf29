// perf/mpi/mpi_backend.cc — Backend implemented with MPI_Allreduce and friends.
#define OMPI_SKIP_MPICXX 1  // the C API only; the C++ bindings are deprecated
#include "perf/mpi/mpi_backend.h"

#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include <string>

namespace perf {
namespace {

MPI_Datatype mpiType(DataType t) {
  switch (t) {
    case kInt8: return MPI_INT8_T;
    case kUint8: return MPI_UINT8_T;
    case kInt32: return MPI_INT32_T;
    case kUint32: return MPI_UINT32_T;
    case kInt64: return MPI_INT64_T;
    case kUint64: return MPI_UINT64_T;
    case kFloat: return MPI_FLOAT;
    case kDouble: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpiOp(RedOp op) {
  switch (op) {
    case kSum:
    case kAvg: return MPI_SUM;
    case kProd: return MPI_PROD;
    case kMax: return MPI_MAX;
    case kMin: return MPI_MIN;
    default: return MPI_OP_NULL;
  }
}

template <typename T>
void divideBy(void* buf, size_t count, int n) {
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(n));
}

class MpiBackend : public Backend {
 public:
  int init(int* argc, char*** argv) override {
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Init_thread");
    initialized_ = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank_)) != MPI_SUCCESS)
      return fail(rc, "MPI_Comm_rank");
    if ((rc = MPI_Comm_size(MPI_COMM_WORLD, &nranks_)) != MPI_SUCCESS)
      return fail(rc, "MPI_Comm_size");
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(lib, &len) == MPI_SUCCESS) {
      std::string s(lib, static_cast<size_t>(len));
      version_ = s.substr(0, s.find_first_of(",\n"));
    }
    return 0;
  }

  const char* name() const override { return "mpi"; }
  std::string version() const override { return version_; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  bool supports(DataType t, RedOp op) const override {
    return mpiType(t) != MPI_DATATYPE_NULL && mpiOp(op) != MPI_OP_NULL;
  }

  int allReduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op) override {
    if (tooBig(count, "MPI_Allreduce")) return 1;
    const void* in = sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf;
    int rc =
        MPI_Allreduce(in, recvbuf, static_cast<int>(count), mpiType(t), mpiOp(op), MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Allreduce");
    if (op == kAvg) divideAll(recvbuf, count, t);
    return 0;
  }
  int allGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType t) override {
    if (tooBig(sendcount, "MPI_Allgather")) return 1;
    const int c = static_cast<int>(sendcount);
    // In place: sendbuf == recvbuf + rank*count, which is where MPI_IN_PLACE reads from.
    const void* in = sendbuf == at(recvbuf, rank_, sendcount, t) ? MPI_IN_PLACE : sendbuf;
    return ok(MPI_Allgather(in, c, mpiType(t), recvbuf, c, mpiType(t), MPI_COMM_WORLD),
              "MPI_Allgather");
  }
  int reduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType t,
                    RedOp op) override {
    if (tooBig(recvcount, "MPI_Reduce_scatter_block")) return 1;
    const int c = static_cast<int>(recvcount);
    // Chorus' in-place (recvbuf == sendbuf + rank*recvcount) is MPI_IN_PLACE on sendbuf,
    // which leaves the result at its start: move it where Chorus puts it.
    const bool inPlace = recvbuf == at(sendbuf, rank_, recvcount, t);
    void* out = inPlace ? const_cast<void*>(sendbuf) : recvbuf;
    int rc = MPI_Reduce_scatter_block(inPlace ? MPI_IN_PLACE : sendbuf, out, c, mpiType(t),
                                      mpiOp(op), MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Reduce_scatter_block");
    if (inPlace && out != recvbuf) memmove(recvbuf, out, recvcount * typeSize(t));
    if (op == kAvg) divideAll(recvbuf, recvcount, t);
    return 0;
  }
  int broadcast(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    if (tooBig(count, "MPI_Bcast")) return 1;
    if (rank_ == root && sendbuf != recvbuf) memcpy(recvbuf, sendbuf, count * typeSize(t));
    return ok(MPI_Bcast(recvbuf, static_cast<int>(count), mpiType(t), root, MPI_COMM_WORLD),
              "MPI_Bcast");
  }
  int reduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op,
             int root) override {
    if (tooBig(count, "MPI_Reduce")) return 1;
    const void* in = (rank_ == root && sendbuf == recvbuf) ? MPI_IN_PLACE : sendbuf;
    int rc = MPI_Reduce(in, recvbuf, static_cast<int>(count), mpiType(t), mpiOp(op), root,
                        MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return fail(rc, "MPI_Reduce");
    if (op == kAvg && rank_ == root) divideAll(recvbuf, count, t);
    return 0;
  }
  int allToAll(const void* sendbuf, void* recvbuf, size_t count, DataType t) override {
    if (tooBig(count, "MPI_Alltoall")) return 1;
    const int c = static_cast<int>(count);
    const void* in = sendbuf == recvbuf ? MPI_IN_PLACE : sendbuf;
    return ok(MPI_Alltoall(in, c, mpiType(t), recvbuf, c, mpiType(t), MPI_COMM_WORLD),
              "MPI_Alltoall");
  }
  int scatter(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    if (tooBig(count, "MPI_Scatter")) return 1;
    const int c = static_cast<int>(count);
    void* out = (rank_ == root && recvbuf == at(sendbuf, root, count, t)) ? MPI_IN_PLACE : recvbuf;
    return ok(MPI_Scatter(sendbuf, c, mpiType(t), out, c, mpiType(t), root, MPI_COMM_WORLD),
              "MPI_Scatter");
  }
  int gather(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    if (tooBig(count, "MPI_Gather")) return 1;
    const int c = static_cast<int>(count);
    const void* in =
        (rank_ == root && sendbuf == at(recvbuf, root, count, t)) ? MPI_IN_PLACE : sendbuf;
    return ok(MPI_Gather(in, c, mpiType(t), recvbuf, c, mpiType(t), root, MPI_COMM_WORLD),
              "MPI_Gather");
  }
  int sendRecv(const void* sendbuf, int sendPeer, void* recvbuf, int recvPeer, size_t count,
               DataType t) override {
    if (tooBig(count, "MPI_Sendrecv")) return 1;
    const int c = static_cast<int>(count);
    if (sendbuf == recvbuf)
      return ok(MPI_Sendrecv_replace(recvbuf, c, mpiType(t), sendPeer, 0, recvPeer, 0,
                                     MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                "MPI_Sendrecv_replace");
    return ok(MPI_Sendrecv(sendbuf, c, mpiType(t), sendPeer, 0, recvbuf, c, mpiType(t), recvPeer, 0,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
  }
  int barrierColl() override { return barrier(); }

  int barrier() override {
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Barrier");
  }
  int allGatherBytes(const void* in, void* out, size_t bytes) override {
    int rc = MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes),
                           MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Allgather");
  }
  int allReduceDoubles(double* values, int n, RedOp op) override {
    int rc = MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, mpiOp(op), MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Allreduce(double)");
  }

  std::string errorString() const override { return error_; }
  void abortJob() override {
    if (initialized_) MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int finalize() override {
    initialized_ = false;
    int rc = MPI_Finalize();
    return rc == MPI_SUCCESS ? 0 : fail(rc, "MPI_Finalize");
  }

 private:
  int ok(int rc, const char* call) { return rc == MPI_SUCCESS ? 0 : fail(rc, call); }
  // MPI counts are ints.
  int tooBig(size_t count, const char* call) {
    if (count <= static_cast<size_t>(INT32_MAX)) return 0;
    error_ = std::string(call) + ": count does not fit an int";
    return 1;
  }
  static const char* at(const void* buf, int block, size_t count, DataType t) {
    return elemPtr(buf, static_cast<size_t>(block) * count, t);
  }
  // avg = MPI_SUM, then a division on the host (what an MPI user writes).
  void divideAll(void* buf, size_t count, DataType t) const {
    switch (t) {
      case kInt8: divideBy<int8_t>(buf, count, nranks_); break;
      case kUint8: divideBy<uint8_t>(buf, count, nranks_); break;
      case kInt32: divideBy<int32_t>(buf, count, nranks_); break;
      case kUint32: divideBy<uint32_t>(buf, count, nranks_); break;
      case kInt64: divideBy<int64_t>(buf, count, nranks_); break;
      case kUint64: divideBy<uint64_t>(buf, count, nranks_); break;
      case kFloat: divideBy<float>(buf, count, nranks_); break;
      case kDouble: divideBy<double>(buf, count, nranks_); break;
      default: break;
    }
  }
  int fail(int rc, const char* call) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
    error_ = std::string(call) + ": " + std::string(msg, static_cast<size_t>(len)) + " (" +
             std::to_string(rc) + ")";
    return 1;
  }

  bool initialized_ = false;
  int rank_ = 0;
  int nranks_ = 1;
  std::string version_ = "?";
  std::string error_;
};

}  // namespace

Backend* makeMpiBackend() { return new MpiBackend(); }

}  // namespace perf
