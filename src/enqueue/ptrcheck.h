// ptrcheck.h — is a user buffer host memory this process can touch?
//
// A device pointer handed to a GPU-less process, a freed buffer or a small integer would
// otherwise crash a rank mid-collective and hang its peers. The check asks the kernel
// (mincore) whether every page of the range is mapped, and remembers recent answers per
// communicator so a training loop reusing its buffers pays nothing.
#pragma once

#include <cstddef>

#include "chorus.h"

struct chorusComm;

namespace chorus {

chorusResult_t checkHostBuffer(chorusComm* comm, const void* ptr, size_t bytes, const char* api,
                               const char* argName);

}  // namespace chorus
