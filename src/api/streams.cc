// streams.cc — host streams and user reduction ops.
#include <cstring>

#include "src/api/resolve.h"
#include "chorus.h"
#include "src/comm/comm.h"
#include "kernels/host/host_reduce.h"
#include "src/core/checks.h"
#include "src/cuda/device_path.h"
#include "src/enqueue/stream.h"

using namespace chorus;

extern "C" {

CHORUS_API chorusResult_t chorusStreamCreate(chorusStream_t* stream) {
  clearThreadLastError();
  if (!stream) CHORUS_FAIL(chorusInvalidArgument, "chorusStreamCreate: stream is NULL");
  return streamCreate(stream);
}

CHORUS_API chorusResult_t chorusStreamSynchronize(chorusStream_t stream) {
  clearThreadLastError();
  if (!stream) return chorusSuccess;  // the NULL stream is always synchronous
  CHORUS_CHECK(streamCheck(stream, "chorusStreamSynchronize"));
  return streamSynchronize(stream);
}

CHORUS_API chorusResult_t chorusStreamQuery(chorusStream_t stream) {
  clearThreadLastError();
  if (!stream) return chorusSuccess;
  CHORUS_CHECK(streamCheck(stream, "chorusStreamQuery"));
  return streamQuery(stream);
}

CHORUS_API chorusResult_t chorusStreamDestroy(chorusStream_t stream) {
  clearThreadLastError();
  if (!stream) return chorusSuccess;
  CHORUS_CHECK(streamCheck(stream, "chorusStreamDestroy"));
  chorusResult_t r = streamSynchronize(stream);
  streamDestroy(stream);
  return r;
}

CHORUS_API chorusResult_t chorusStreamFromCuda(void* cudaStream, chorusStream_t* stream) {
  clearThreadLastError();
  return cuda::streamFromRuntime(cuda::defaultRuntime(), cudaStream, stream);
}

static chorusResult_t chorusRedOpCreatePreMulSumImpl(chorusRedOp_t* op, void* scalar,
                                                     chorusDataType_t datatype,
                                                     chorusScalarResidence_t residence,
                                                     chorusComm_t comm) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusRedOpCreatePreMulSum"));
  if (!op) CHORUS_FAIL(chorusInvalidArgument, "chorusRedOpCreatePreMulSum: op is NULL");
  if (!scalar) CHORUS_FAIL(chorusInvalidArgument, "chorusRedOpCreatePreMulSum: scalar is NULL");
  if (static_cast<unsigned>(datatype) >= chorusNumTypes)
    CHORUS_FAIL(chorusInvalidArgument, "chorusRedOpCreatePreMulSum: datatype %d is invalid",
                static_cast<int>(datatype));
  if (residence != chorusScalarHostImmediate)
    CHORUS_FAIL(chorusInvalidUsage,
                "chorusRedOpCreatePreMulSum: scalar residence %d is not supported: only "
                "chorusScalarHostImmediate works with host buffers",
                static_cast<int>(residence));
  kernels::ReduceSpec spec;
  spec.type = datatype;
  spec.kind = kernels::ReduceKind::Sum;
  spec.preMul = true;
  std::memcpy(spec.scalar, scalar, kernels::typeSize(datatype));
  std::lock_guard<std::mutex> lock(comm->userOpsMutex);
  size_t i = 0;
  while (i < comm->userOps.size() && comm->userOps[i].inUse) ++i;
  if (i == comm->userOps.size()) comm->userOps.emplace_back();
  comm->userOps[i].inUse = true;
  comm->userOps[i].spec = spec;
  *op = static_cast<chorusRedOp_t>(chorusNumOps + static_cast<int>(i));
  return chorusSuccess;
}

static chorusResult_t chorusRedOpDestroyImpl(chorusRedOp_t op, chorusComm_t comm) {
  clearThreadLastError();
  CHORUS_CHECK(commCheck(comm, "chorusRedOpDestroy"));
  const long idx = static_cast<long>(op) - chorusNumOps;
  std::lock_guard<std::mutex> lock(comm->userOpsMutex);
  if (idx < 0 || idx >= static_cast<long>(comm->userOps.size()) ||
      !comm->userOps[static_cast<size_t>(idx)].inUse)
    CHORUS_FAIL(chorusInvalidArgument, "chorusRedOpDestroy: op %d is not a live user op",
                static_cast<int>(op));
  comm->userOps[static_cast<size_t>(idx)].inUse = false;
  return chorusSuccess;
}

CHORUS_API chorusResult_t chorusRedOpCreatePreMulSum(chorusRedOp_t* op, void* scalar,
                                                     chorusDataType_t datatype,
                                                     chorusScalarResidence_t residence,
                                                     chorusComm_t comm) {
  return chorus::recordOnComm(
      comm, chorusRedOpCreatePreMulSumImpl(op, scalar, datatype, residence, comm));
}

CHORUS_API chorusResult_t chorusRedOpDestroy(chorusRedOp_t op, chorusComm_t comm) {
  return chorus::recordOnComm(comm, chorusRedOpDestroyImpl(op, comm));
}

}  // extern "C"
