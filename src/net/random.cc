#include "src/net/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "src/core/checks.h"

namespace chorus {

chorusResult_t randomBytes(void* dst, size_t bytes) {
  auto* p = static_cast<unsigned char*>(dst);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = getrandom(p + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      CHORUS_FAIL(chorusSystemError, "getrandom: %s", strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return chorusSuccess;
}

}  // namespace chorus
