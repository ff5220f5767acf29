#include "src/core/timeout.h"

#include "src/core/params.h"

namespace chorus {

int64_t effectiveTimeoutS(int64_t configSeconds) {
  if (configSeconds > 0) return configSeconds;
  const int64_t env = paramInt(Param::TimeoutS);
  return env > 0 ? env : kDefaultTimeoutS;
}

}  // namespace chorus
