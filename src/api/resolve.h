// resolve.h — turning the user's (op, datatype) into the arithmetic the kernels run.
#pragma once

#include "chorus.h"
#include "kernels/reduce_spec.h"

struct chorusComm;

namespace chorus {

/// sum/prod/max/min map directly; avg becomes a pre-multiplied sum by 1/n for floating
/// types and a sum followed by an integer division for integer types; user ops come from
/// the communicator's table.
chorusResult_t resolveReduceSpec(chorusComm* comm, chorusRedOp_t op, chorusDataType_t type,
                                 const char* api, kernels::ReduceSpec* spec);

/// Writes `value` as one element of `type` (float16/bfloat16 rounded to nearest even).
void encodeScalar(chorusDataType_t type, double value, void* out);

bool isFloatType(chorusDataType_t type);

}  // namespace chorus
