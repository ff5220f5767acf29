// core/live_handles.h — which communicator and stream handles are alive, without reading them.
//
// A user may pass a handle after destroying it. Reading a magic number from it then reads
// freed memory (undefined behaviour, and an ASan report). So creation adds the handle's
// address here, destruction removes it before the memory is freed, and a check asks here
// instead of dereferencing. One process-wide table per kind, lock-free to read and changed
// under a mutex (src/core/live_handles.cc): a handle is created, checked and destroyed from
// any thread. A freed address that a new handle reuses
// reads as live again; that handle is then a valid one, so the call is still safe.
#pragma once

namespace chorus {

enum class HandleKind { Comm, Stream };

void liveHandleAdd(HandleKind kind, const void* handle);
void liveHandleRemove(HandleKind kind, const void* handle);
bool liveHandleHas(HandleKind kind, const void* handle);

}  // namespace chorus
