// dtypes.h — how a PyTorch tensor's dtype and a c10d reduce op become Chorus arguments.
//
// Kept free of the heavy ATen/c10d headers (only c10's ScalarType) so that the mapping is
// one small translation unit; process_group.cc turns a ReduceOp into the plain inputs here.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <string>

#include "chorus.h"

namespace chorus_torch {

/// The reduction a c10d op asks for, independent of c10d's headers.
enum class Reduction { Sum, Avg, Product, Min, Max, PreMulSum, BitwiseAnd, BitwiseOr, BitwiseXor };

/// What a reducing collective runs: Chorus type, element count multiplier (complex numbers
/// are two floats) and built-in op. `error` is non-empty when the pair is not supported.
struct ReduceMapping {
  chorusDataType_t type = chorusFloat32;
  size_t countFactor = 1;
  chorusRedOp_t op = chorusSum;  // ignored for PreMulSum (the caller creates the op)
  std::string error;
};

/// A reduction of tensors of dtype `t` with `r`.
ReduceMapping mapReduction(c10::ScalarType t, Reduction r);

/// Data movement (broadcast, gather, all-to-all, send...) copies bytes: any dtype works.
/// Returns the element size in bytes.
size_t byteSize(c10::ScalarType t);

/// Packs a pre-multiplication factor as one element of `type` (f16/bf16 rounded to nearest).
void packScalar(double factor, chorusDataType_t type, void* out);

const char* reductionName(Reduction r);

}  // namespace chorus_torch
