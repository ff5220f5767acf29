// perf/ccl/ccl_backend.cc — Backend implemented with oneCCL's collectives (see the header).
#define OMPI_SKIP_MPICXX 1  // the C API only
#include "perf/ccl/ccl_backend.h"

#include <mpi.h>
#include <string.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <oneapi/ccl.hpp>

namespace perf {
namespace {

bool cclType(DataType t, ccl::datatype* out) {
  switch (t) {
    case kInt8: *out = ccl::datatype::int8; return true;
    case kUint8: *out = ccl::datatype::uint8; return true;
    case kInt32: *out = ccl::datatype::int32; return true;
    case kUint32: *out = ccl::datatype::uint32; return true;
    case kInt64: *out = ccl::datatype::int64; return true;
    case kUint64: *out = ccl::datatype::uint64; return true;
    case kHalf: *out = ccl::datatype::float16; return true;
    case kFloat: *out = ccl::datatype::float32; return true;
    case kDouble: *out = ccl::datatype::float64; return true;
    case kBfloat16: *out = ccl::datatype::bfloat16; return true;
    default: return false;
  }
}

ccl::reduction cclOp(RedOp op) {
  switch (op) {
    case kProd: return ccl::reduction::prod;
    case kMax: return ccl::reduction::max;
    case kMin: return ccl::reduction::min;
    case kAvg: return ccl::reduction::avg;
    default: return ccl::reduction::sum;
  }
}

MPI_Op mpiOp(RedOp op) {
  switch (op) {
    case kMax: return MPI_MAX;
    case kMin: return MPI_MIN;
    default: return MPI_SUM;
  }
}

class CclBackend : public Backend {
 public:
  int init(int* argc, char*** argv) override {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
      return fail("MPI_Init_thread failed");
    mpiUp_ = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks_);
    return guard("oneCCL init", [&] {
      ccl::init();
      // Rank 0's main KVS address reaches the others through MPI (oneCCL's own examples
      // bootstrap the same way).
      ccl::shared_ptr_class<ccl::kvs> kvs;
      ccl::kvs::address_type addr;
      if (rank_ == 0) {
        kvs = ccl::create_main_kvs();
        addr = kvs->get_address();
      }
      MPI_Bcast(addr.data(), static_cast<int>(addr.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
      if (rank_ != 0) kvs = ccl::create_kvs(addr);
      comm_.reset(new ccl::communicator(ccl::create_communicator(nranks_, rank_, kvs)));
      ccl::library_version v = ccl::get_library_version();
      version_ = std::string("oneCCL ") + (v.full ? v.full : "?");
    });
  }

  const char* name() const override { return "ccl"; }
  std::string version() const override { return version_; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  bool supports(DataType t, RedOp op) const override {
    ccl::datatype d;
    return cclType(t, &d) && op >= kSum && op < kNumOps;
  }

  int allReduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op) override {
    return guard("ccl::allreduce",
                 [&] { ccl::allreduce(sendbuf, recvbuf, count, dt(t), cclOp(op), *comm_).wait(); });
  }
  int allGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType t) override {
    return guard("ccl::allgatherv", [&] {
      std::vector<size_t> counts(static_cast<size_t>(nranks_), sendcount);
      ccl::allgatherv(sendbuf, sendcount, recvbuf, counts, dt(t), *comm_).wait();
    });
  }
  int reduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType t,
                    RedOp op) override {
    return guard("ccl::reduce_scatter", [&] {
      ccl::reduce_scatter(sendbuf, recvbuf, recvcount, dt(t), cclOp(op), *comm_).wait();
    });
  }
  int broadcast(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    return guard("ccl::broadcast", [&] {
      if (sendbuf == recvbuf)
        ccl::broadcast(recvbuf, count, dt(t), root, *comm_).wait();
      else
        ccl::broadcast(const_cast<void*>(sendbuf), recvbuf, count, dt(t), root, *comm_).wait();
    });
  }
  int reduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op,
             int root) override {
    return guard("ccl::reduce", [&] {
      ccl::reduce(sendbuf, recvbuf, count, dt(t), cclOp(op), root, *comm_).wait();
    });
  }
  int allToAll(const void* sendbuf, void* recvbuf, size_t count, DataType t) override {
    return guard("ccl::alltoall",
                 [&] { ccl::alltoall(sendbuf, recvbuf, count, dt(t), *comm_).wait(); });
  }
  int scatter(const void*, void*, size_t, DataType, int) override {
    return fail("oneCCL has no scatter");
  }
  int gather(const void*, void*, size_t, DataType, int) override {
    return fail("oneCCL has no gather");
  }
  int sendRecv(const void*, int, void*, int, size_t, DataType) override {
    return fail("the oneCCL twin has no sendrecv");
  }
  int barrierColl() override {
    return guard("ccl::barrier", [&] { ccl::barrier(*comm_).wait(); });
  }

  // The driver's helpers run on MPI, outside the measured loops.
  int barrier() override {
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : fail("MPI_Barrier failed");
  }
  int allGatherBytes(const void* in, void* out, size_t bytes) override {
    int rc = MPI_Allgather(in, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes),
                           MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail("MPI_Allgather failed");
  }
  int allReduceDoubles(double* values, int n, RedOp op) override {
    int rc = MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, mpiOp(op), MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : fail("MPI_Allreduce(double) failed");
  }

  std::string errorString() const override { return error_; }
  void abortJob() override {
    if (mpiUp_) MPI_Abort(MPI_COMM_WORLD, 2);
  }
  int finalize() override {
    comm_.reset();
    mpiUp_ = false;
    return MPI_Finalize() == MPI_SUCCESS ? 0 : fail("MPI_Finalize failed");
  }

 private:
  ccl::datatype dt(DataType t) const {
    ccl::datatype d = ccl::datatype::float32;
    cclType(t, &d);
    return d;
  }
  // oneCCL reports errors as exceptions; the driver wants a status and a message.
  template <typename F>
  int guard(const char* what, F&& f) {
    try {
      f();
      return 0;
    } catch (const std::exception& e) {
      return fail(std::string(what) + ": " + e.what());
    }
  }
  int fail(const std::string& msg) {
    error_ = msg;
    return 1;
  }

  bool mpiUp_ = false;
  int rank_ = 0;
  int nranks_ = 1;
  std::unique_ptr<ccl::communicator> comm_;
  std::string version_ = "oneCCL ?";
  std::string error_;
};

}  // namespace

Backend* makeCclBackend() { return new CclBackend(); }

}  // namespace perf
