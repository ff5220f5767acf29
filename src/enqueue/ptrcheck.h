// ptrcheck.h — is a user buffer host memory this process can touch?
//
// A device pointer handed to a GPU-less process, a freed buffer or a small integer would
// otherwise crash a rank mid-collective and hang its peers. The check asks the kernel
// (mincore) whether every page of the range is mapped, and remembers recent answers per
// communicator so a training loop reusing its buffers pays nothing. For buffers that will
// be written, the mappings of the first and last byte must be writable (/proc/self/maps;
// nothing is written, since queued stream operations may be writing the buffer), so a
// read-only mapping is refused before any collective step runs.
#pragma once

#include <cstddef>
#include <string>

#include "chorus.h"

struct chorusComm;

namespace chorus {

/// What else a pointer that is not host memory may be, for the error message ("memory of
/// GPU 0: ..."); never empty. The device path provides it (cuda::describeNonHostPointer).
using DescribePointer = std::string (*)(const void* ptr);

/// `writable`: the buffer will be written (a receive buffer); a read-only mapping is an
/// error too. `describe` explains a pointer that is not host memory (may be null).
chorusResult_t checkHostBuffer(chorusComm* comm, const void* ptr, size_t bytes, const char* api,
                               const char* argName, bool writable, DescribePointer describe);

}  // namespace chorus
