// registration.cc — chorusMemAlloc/Free and chorusCommRegister/Deregister.
#include "chorus.h"
#include "src/comm/comm.h"
#include "src/comm/peer_mem.h"
#include "src/core/checks.h"

namespace chorus {
namespace {

chorusResult_t commReady(const chorusComm* comm, const char* api) {
  CHORUS_CHECK(commCheck(comm, api));
  if (comm->asyncError.load(std::memory_order_acquire) == chorusInProgress)
    CHORUS_FAIL(chorusInvalidUsage, "%s: the communicator is still initializing", api);
  if (comm->initFailed.load(std::memory_order_acquire))
    CHORUS_FAIL(chorusInvalidUsage, "%s: the communicator's init failed; it can only be destroyed",
                api);
  return chorusSuccess;
}

chorusResult_t registerImpl(chorusComm* comm, void* buff, size_t size, void** handle) {
  clearThreadLastError();
  CHORUS_CHECK(commReady(comm, "chorusCommRegister"));
  comm->activeCalls.fetch_add(1, std::memory_order_acq_rel);
  const chorusResult_t r = peerMemRegister(comm, buff, size, handle);
  comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
  return r;
}

chorusResult_t deregisterImpl(chorusComm* comm, void* handle) {
  clearThreadLastError();
  CHORUS_CHECK(commReady(comm, "chorusCommDeregister"));
  comm->activeCalls.fetch_add(1, std::memory_order_acq_rel);
  const chorusResult_t r = peerMemDeregister(comm, handle);
  comm->activeCalls.fetch_sub(1, std::memory_order_acq_rel);
  return r;
}

}  // namespace
}  // namespace chorus

extern "C" {

CHORUS_API chorusResult_t chorusMemAlloc(void** ptr, size_t size) {
  chorus::clearThreadLastError();
  return chorus::memAlloc(ptr, size);
}

CHORUS_API chorusResult_t chorusMemFree(void* ptr) {
  chorus::clearThreadLastError();
  return chorus::memFree(ptr);
}

CHORUS_API chorusResult_t chorusCommRegister(const chorusComm_t comm, void* buff, size_t size,
                                             void** handle) {
  return chorus::recordOnComm(comm, chorus::registerImpl(comm, buff, size, handle));
}

CHORUS_API chorusResult_t chorusCommDeregister(const chorusComm_t comm, void* handle) {
  return chorus::recordOnComm(comm, chorus::deregisterImpl(comm, handle));
}

}  // extern "C"
