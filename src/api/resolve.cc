#include "src/api/resolve.h"

#include <cstring>
#include <mutex>

#include "src/comm/comm.h"
#include "src/core/checks.h"
#include "kernels/reduce.h"

namespace chorus {

bool isFloatType(chorusDataType_t t) {
  return t == chorusFloat16 || t == chorusBfloat16 || t == chorusFloat32 || t == chorusFloat64;
}

void encodeScalar(chorusDataType_t type, double value, void* out) {
  switch (type) {
    case chorusInt8: {
      int8_t v = static_cast<int8_t>(value);
      std::memcpy(out, &v, 1);
      break;
    }
    case chorusUint8: {
      uint8_t v = static_cast<uint8_t>(value);
      std::memcpy(out, &v, 1);
      break;
    }
    case chorusInt32: {
      int32_t v = static_cast<int32_t>(value);
      std::memcpy(out, &v, 4);
      break;
    }
    case chorusUint32: {
      uint32_t v = static_cast<uint32_t>(value);
      std::memcpy(out, &v, 4);
      break;
    }
    case chorusInt64: {
      int64_t v = static_cast<int64_t>(value);
      std::memcpy(out, &v, 8);
      break;
    }
    case chorusUint64: {
      uint64_t v = static_cast<uint64_t>(value);
      std::memcpy(out, &v, 8);
      break;
    }
    case chorusFloat16: {
      uint16_t v = kernels::floatToHalf(static_cast<float>(value));
      std::memcpy(out, &v, 2);
      break;
    }
    case chorusBfloat16: {
      uint16_t v = kernels::floatToBf16(static_cast<float>(value));
      std::memcpy(out, &v, 2);
      break;
    }
    case chorusFloat32: {
      float v = static_cast<float>(value);
      std::memcpy(out, &v, 4);
      break;
    }
    case chorusFloat64: std::memcpy(out, &value, 8); break;
    default: break;
  }
}

chorusResult_t resolveReduceSpec(chorusComm* comm, chorusRedOp_t op, chorusDataType_t type,
                                 const char* api, kernels::ReduceSpec* spec) {
  *spec = kernels::ReduceSpec{};
  spec->type = type;
  switch (op) {
    case chorusSum: spec->kind = kernels::ReduceKind::Sum; return chorusSuccess;
    case chorusProd: spec->kind = kernels::ReduceKind::Prod; return chorusSuccess;
    case chorusMax: spec->kind = kernels::ReduceKind::Max; return chorusSuccess;
    case chorusMin: spec->kind = kernels::ReduceKind::Min; return chorusSuccess;
    case chorusAvg:
      spec->kind = kernels::ReduceKind::Sum;
      if (isFloatType(type)) {
        spec->preMul = true;
        encodeScalar(type, 1.0 / comm->nranks, spec->scalar);
      } else {
        spec->postDiv = comm->nranks;
      }
      return chorusSuccess;
    default: break;
  }
  const long idx = static_cast<long>(op) - chorusNumOps;
  std::lock_guard<std::mutex> lock(comm->userOpsMutex);
  if (static_cast<int>(op) < 0 || idx >= static_cast<long>(comm->userOps.size()) ||
      !comm->userOps[static_cast<size_t>(idx)].inUse)
    CHORUS_FAIL(chorusInvalidArgument,
                "%s: op %d is neither a built-in op nor a live op from "
                "chorusRedOpCreatePreMulSum on this communicator",
                api, static_cast<int>(op));
  const kernels::ReduceSpec& u = comm->userOps[static_cast<size_t>(idx)].spec;
  if (u.type != type)
    CHORUS_FAIL(chorusInvalidArgument,
                "%s: op %d was created for datatype %d but the call uses datatype %d", api,
                static_cast<int>(op), static_cast<int>(u.type), static_cast<int>(type));
  *spec = u;
  return chorusSuccess;
}

}  // namespace chorus
