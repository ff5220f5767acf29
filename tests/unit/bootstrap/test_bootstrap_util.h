// Helpers for the bootstrap tests: ranks as threads, roots with short deadlines, raw
// client sockets that play strangers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/net/socket.h"

namespace chorus {
namespace test {

constexpr int64_t kSec = 1000000000ll;
constexpr int64_t kMs = 1000000ll;

/// Runs fn(rank) on nranks threads and joins them.
void runRanks(int nranks, const std::function<void(int)>& fn);

/// Starts a root (on the default interface unless host is given) that gives up after
/// rootSeconds; returns the id.
chorusUniqueId startRoot(double rootSeconds = 20, const char* host = nullptr, int port = 0,
                         const uint8_t* secret = nullptr);

/// Inits nranks ranks in threads against id; results[r] and comms[r] per rank.
void initRanks(const chorusUniqueId& id, int nranks, int64_t deadlineNs,
               std::vector<std::unique_ptr<Bootstrap>>* comms,
               std::vector<chorusResult_t>* results);

/// The root address and secret inside an id.
SockAddr rootOf(const chorusUniqueId& id);
void secretOf(const chorusUniqueId& id, uint8_t* secret);

/// A blocking client connection to addr (fails the test on error); -1 on failure.
int rawConnect(const SockAddr& addr);
/// Writes all bytes (ignores errors: the other side may have dropped us).
void rawWrite(int fd, const void* data, size_t n);
/// True if fd sees EOF / reset within `seconds` (reading and discarding any data).
bool waitClosed(int fd, double seconds);
/// True once connecting to addr is refused (the listener is gone), polling up to `seconds`.
bool waitRefused(const SockAddr& addr, double seconds);
/// Number of open fds of this process.
int openFdCount();

}  // namespace test
}  // namespace chorus
