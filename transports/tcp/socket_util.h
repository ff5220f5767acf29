// tcp/socket_util.h — what the TCP transport adds to the shared socket layer
// (src/net/socket.h): buffer sizing, the authenticated outgoing connect, tokens.
#pragma once

#include <cstdint>
#include <string>

#include "src/net/socket.h"
#include "chorus.h"
#include "transports/tcp/wire.h"

namespace chorus {
namespace tcp {

/// TCP_NODELAY, and SO_SNDBUF/SO_RCVBUF = `bufBytes` when > 0 (0 keeps the kernel's
/// autotuning, which a fixed size turns off), and the congestion control `congestion`
/// when not empty (a refusal is logged, not fatal: the socket keeps the system's).
void tuneSocket(int fd, int64_t bufBytes, const std::string& congestion);

/// TCP_CONGESTION = `name`; false, with errno, when the kernel refuses it (ENOENT: no such
/// algorithm; EPERM: not in net.ipv4.tcp_allowed_congestion_control for this process).
bool setCongestion(int fd, const std::string& name);

/// Connects to a peer's listener and sends `hello` on the new socket; the peer need not be
/// accepting (the kernel completes the handshake into its backlog), so this never waits on
/// the peer's progress. `what` names the target in errors.
chorusResult_t openAuthenticated(const SockAddr& to, const Hello& hello, int64_t bufBytes,
                                 const std::string& congestion, int64_t deadlineNs,
                                 const char* what, Fd* out);

/// A second descriptor (close-on-exec) of the same socket in *out, so that the send and the
/// receive channel of a pair each own one and epoll can watch each for its own events;
/// false, with errno, when the process is out of descriptors. Mind that an epoll watch
/// lives as long as the socket does, not the descriptor: closing one of the two leaves its
/// watch (and the channel pointer in it) in the set while the other is open. Channels'
/// sockets are closed only when the transport is destroyed, after its progress thread.
bool dupSocket(const Fd& from, Fd* out);

/// 64 random bits from the kernel.
chorusResult_t randomToken(uint64_t* out);

}  // namespace tcp
}  // namespace chorus
