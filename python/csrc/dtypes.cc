#include "python/csrc/dtypes.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>

namespace chorus_torch {
namespace {

// Dtypes Chorus reduces natively; everything else (int16, complex with min/max, bool sums)
// gets a clear error rather than a silent wrong answer.
bool nativeType(c10::ScalarType t, chorusDataType_t* out) {
  switch (t) {
    case c10::ScalarType::Char: *out = chorusInt8; return true;
    case c10::ScalarType::Byte: *out = chorusUint8; return true;
    case c10::ScalarType::Int: *out = chorusInt32; return true;
    case c10::ScalarType::Long: *out = chorusInt64; return true;
    case c10::ScalarType::Half: *out = chorusFloat16; return true;
    case c10::ScalarType::BFloat16: *out = chorusBfloat16; return true;
    case c10::ScalarType::Float: *out = chorusFloat32; return true;
    case c10::ScalarType::Double: *out = chorusFloat64; return true;
    default: return false;
  }
}

chorusRedOp_t builtinOp(Reduction r) {
  switch (r) {
    case Reduction::Avg: return chorusAvg;
    case Reduction::Product: return chorusProd;
    case Reduction::Min: return chorusMin;
    case Reduction::Max: return chorusMax;
    default: return chorusSum;
  }
}

// The name a PyTorch user writes, for error messages.
std::string torchName(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Short: return "torch.int16";
    case c10::ScalarType::ComplexHalf: return "torch.complex32";
    case c10::ScalarType::QInt8: return "torch.qint8";
    case c10::ScalarType::QUInt8: return "torch.quint8";
    case c10::ScalarType::QInt32: return "torch.qint32";
    default: return std::string("torch.") + c10::toString(t);
  }
}

}  // namespace

const char* reductionName(Reduction r) {
  switch (r) {
    case Reduction::Sum: return "SUM";
    case Reduction::Avg: return "AVG";
    case Reduction::Product: return "PRODUCT";
    case Reduction::Min: return "MIN";
    case Reduction::Max: return "MAX";
    case Reduction::PreMulSum: return "PREMUL_SUM";
    case Reduction::BitwiseAnd: return "BAND";
    case Reduction::BitwiseOr: return "BOR";
    case Reduction::BitwiseXor: return "BXOR";
  }
  return "?";
}

ReduceMapping mapReduction(c10::ScalarType t, Reduction r) {
  ReduceMapping m;
  if (r == Reduction::BitwiseAnd || r == Reduction::BitwiseOr || r == Reduction::BitwiseXor) {
    m.error = std::string("chorus: ReduceOp.") + reductionName(r) +
              " is not supported (Chorus reduces with sum, avg, product, min, max, premul_sum)";
    return m;
  }
  m.op = builtinOp(r);
  if (nativeType(t, &m.type)) return m;
  if (t == c10::ScalarType::Bool) {
    // A bool is one byte holding 0 or 1: "any" (sum) is max, "all" (product) is min.
    m.type = chorusUint8;
    if (r == Reduction::Sum)
      m.op = chorusMax;
    else if (r == Reduction::Product)
      m.op = chorusMin;
    else if (r != Reduction::Min && r != Reduction::Max)
      m.error = std::string("chorus: ReduceOp.") + reductionName(r) + " is not supported for bool";
    return m;
  }
  if (t == c10::ScalarType::ComplexFloat || t == c10::ScalarType::ComplexDouble) {
    // Sums of complex numbers are sums of their real and imaginary parts.
    m.type = t == c10::ScalarType::ComplexFloat ? chorusFloat32 : chorusFloat64;
    m.countFactor = 2;
    if (r != Reduction::Sum && r != Reduction::Avg && r != Reduction::PreMulSum)
      m.error = std::string("chorus: ReduceOp.") + reductionName(r) +
                " is not defined for complex tensors";
    return m;
  }
  m.error = "chorus: reductions of dtype " + torchName(t) +
            " are not supported (Chorus reduces int8, uint8, int32, int64, float16, bfloat16, "
            "float32, float64, bool, complex64/128 sums)";
  return m;
}

size_t byteSize(c10::ScalarType t) { return c10::elementSize(t); }

void packScalar(double factor, chorusDataType_t type, void* out) {
  switch (type) {
    case chorusFloat16: {
      c10::Half h(static_cast<float>(factor));
      std::memcpy(out, &h, 2);
      break;
    }
    case chorusBfloat16: {
      c10::BFloat16 b(static_cast<float>(factor));
      std::memcpy(out, &b, 2);
      break;
    }
    case chorusFloat32: {
      float f = static_cast<float>(factor);
      std::memcpy(out, &f, 4);
      break;
    }
    case chorusFloat64: std::memcpy(out, &factor, 8); break;
    case chorusInt8: {
      int8_t v = static_cast<int8_t>(factor);
      std::memcpy(out, &v, 1);
      break;
    }
    case chorusUint8: {
      uint8_t v = static_cast<uint8_t>(factor);
      std::memcpy(out, &v, 1);
      break;
    }
    case chorusInt32: {
      int32_t v = static_cast<int32_t>(factor);
      std::memcpy(out, &v, 4);
      break;
    }
    case chorusUint32: {
      uint32_t v = static_cast<uint32_t>(factor);
      std::memcpy(out, &v, 4);
      break;
    }
    case chorusInt64: {
      int64_t v = static_cast<int64_t>(factor);
      std::memcpy(out, &v, 8);
      break;
    }
    case chorusUint64: {
      uint64_t v = static_cast<uint64_t>(factor);
      std::memcpy(out, &v, 8);
      break;
    }
    default: break;
  }
}

}  // namespace chorus_torch
