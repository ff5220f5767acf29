// errors.cc — version, result strings and last-error detail.
#include <string>

#include "chorus.h"
#include "src/comm/comm.h"
#include "src/core/checks.h"
#include "src/core/live_handles.h"

extern "C" {

CHORUS_API chorusResult_t chorusGetVersion(int* version) {
  chorus::clearThreadLastError();
  if (!version) CHORUS_FAIL(chorusInvalidArgument, "chorusGetVersion: version is NULL");
  *version = CHORUS_VERSION_CODE;
  return chorusSuccess;
}

CHORUS_API const char* chorusGetErrorString(chorusResult_t result) {
  switch (result) {
    case chorusSuccess: return "no error";
    case chorusUnhandledError: return "unhandled error (a bug in Chorus)";
    case chorusSystemError: return "system call failed";
    case chorusInternalError: return "internal error";
    case chorusInvalidArgument: return "invalid argument";
    case chorusInvalidUsage: return "invalid usage";
    case chorusRemoteError: return "remote error (a peer failed or disconnected)";
    case chorusInProgress: return "operation in progress";
    case chorusTimeout: return "timed out";
    case chorusAborted: return "communicator aborted";
    case chorusNumResults: break;
  }
  return "unknown result code";
}

CHORUS_API const char* chorusGetLastError(chorusComm_t comm) {
  if (comm == nullptr || !chorus::liveHandleHas(chorus::HandleKind::Comm, comm))
    return chorus::threadLastError();
  // A copy per calling thread: another thread (a non-blocking init, a stream worker) may
  // record a new error on the communicator while the caller still reads this one.
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(comm->errorMutex);
  copy = comm->lastError;
  return copy.c_str();
}

}  // extern "C"
