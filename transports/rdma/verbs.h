// rdma/verbs.h — the few verbs the RDMA transport uses, behind one small interface.
//
// Why an interface: our machines have no RDMA device, so the transport's logic (queue pair
// set-up, credits, registration cache, chunking, error completions) could not be exercised
// at all if it called libibverbs directly. It calls this instead. Two implementations:
//   * verbs_ibv.cc — libibverbs. The ONLY one the shipped library (libchorus) contains.
//   * verbs_standin.cc — a STAND-IN for tests: in-memory queue pairs between the thread
//     ranks of one process. It is compiled into test binaries only (tests/rdma), never into
//     libchorus, and says so in its name() ("stand-in").
// The types are plain structs of our own, so this header needs no verbs headers; values
// that come from the verbs ABI (completion status, MTU enum) keep libibverbs' numbering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chorus.h"

namespace chorus {
namespace rdma {

enum class LinkLayer : uint8_t { InfiniBand, Ethernet };
enum class GidType : uint8_t { IB, RoCEv1, RoCEv2 };

struct GidEntry {
  int index = 0;
  uint8_t raw[16] = {};
  GidType type = GidType::IB;
};

struct PortInfo {
  int port = 1;         ///< 1-based, as verbs counts
  bool active = false;  ///< IBV_PORT_ACTIVE
  LinkLayer link = LinkLayer::InfiniBand;
  uint16_t lid = 0;
  int activeMtu = 3;                ///< enum ibv_mtu: 1=256 .. 5=4096
  uint64_t maxMsgBytes = 1u << 30;  ///< largest single RDMA write
  std::vector<GidEntry> gids;       ///< populated entries only
};

struct DeviceInfo {
  std::string name;    ///< "mlx5_0"
  int maxQpWr = 1024;  ///< work requests per queue
  std::vector<PortInfo> ports;
};

/// Everything a peer needs to aim an RC queue pair at ours.
struct QpAddress {
  uint32_t qpn = 0;
  uint32_t psn = 0;  ///< first packet sequence number
  uint16_t lid = 0;
  uint8_t gid[16] = {};
  bool useGrh = false;  ///< RoCE (always) or IB with a global route
  int gidIndex = 0;     ///< local GID table index (meaningful on the local side only)
  int mtu = 3;          ///< enum ibv_mtu
  int port = 1;
};

/// Per-queue-pair knobs (from RdmaOptions: CHORUS_IB_*).
struct QpTiming {
  int timeout = 18;  ///< ACK timeout exponent: 4.096 us * 2^timeout
  int retryCnt = 7;
  int rnrRetry = 7;  ///< 7 = retry forever on receiver-not-ready
  int sl = 0;
  int trafficClass = 0;
};

struct MemRegion {
  uint64_t handle = 0;  ///< implementation's object (0: none)
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

/// One RDMA WRITE (with immediate when `withImm`): `len` bytes from `local` (lkey) to
/// `remoteAddr` (rkey) on the peer. A zero-length write with immediate carries only `imm`.
struct WriteRequest {
  uint64_t wrId = 0;
  const void* local = nullptr;
  size_t len = 0;
  uint32_t lkey = 0;
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0;
  bool withImm = false;
  uint32_t imm = 0;
};

/// One completion. For errors only wrId and status are defined (as in verbs): the
/// transport encodes what it needs to know into wrId.
struct Completion {
  uint64_t wrId = 0;
  int status = 0;  ///< enum ibv_wc_status: 0 success
  bool hasImm = false;
  uint32_t imm = 0;
};

// enum ibv_wc_status values the transport treats specially.
constexpr int kWcSuccess = 0;
constexpr int kWcFlushErr = 5;

/// One opened device port: protection domain, one completion queue (shared by every queue
/// pair of the transport) and its completion channel. Used by one thread at a time except
/// where noted.
class VerbsContext {
 public:
  virtual ~VerbsContext() = default;
  virtual const DeviceInfo& device() const = 0;
  virtual const PortInfo& port() const = 0;
  /// Registers [addr, addr+len) for local access (and remote writes when `remoteWrite`).
  /// Returns 0 or an errno value (ENOMEM / EAGAIN: out of registrations or pinnable memory,
  /// which the registration cache answers by evicting).
  virtual int registerMemory(void* addr, size_t len, bool remoteWrite, MemRegion* out) = 0;
  virtual void deregister(const MemRegion& mr) = 0;
  /// A reliable-connected queue pair in the INIT state (receives may be posted).
  virtual chorusResult_t createQp(int maxSend, int maxRecv, uint64_t* qp, uint32_t* qpn) = 0;
  /// INIT -> RTR (aimed at `remote`) -> RTS.
  virtual chorusResult_t connectQp(uint64_t qp, const QpAddress& local, const QpAddress& remote,
                                   const QpTiming& timing) = 0;
  virtual void destroyQp(uint64_t qp) = 0;
  /// A zero-length receive: consumed by each incoming write with immediate. Returns 0 or
  /// an errno value.
  virtual int postRecv(uint64_t qp, uint64_t wrId) = 0;
  /// Every write is signaled (one completion each). Returns 0 or an errno value.
  virtual int postWrite(uint64_t qp, const WriteRequest& w) = 0;
  /// Up to `max` completions; < 0 when the completion queue itself failed.
  virtual int poll(Completion* out, int max) = 0;
  /// A file descriptor that becomes readable once a completion arrives after armEvents().
  virtual int eventFd() const = 0;
  virtual chorusResult_t armEvents() = 0;
  /// Consumes the readiness of eventFd() (non-blocking).
  virtual void ackEvents() = 0;
  /// Human text of a completion status (ibv_wc_status_str).
  virtual const char* statusText(int status) const = 0;
};

class Verbs {
 public:
  virtual ~Verbs() = default;
  /// "libibverbs", or a name containing "stand-in".
  virtual const char* name() const = 0;
  /// The devices present; an empty list with the reason in *why when there are none
  /// (e.g. "ibv_get_device_list: Function not implemented").
  virtual void listDevices(std::vector<DeviceInfo>* out, std::string* why) = 0;
  /// Opens `device` port `port` with a completion queue of `cqDepth` entries.
  virtual chorusResult_t open(const std::string& device, int port, int cqDepth,
                              std::unique_ptr<VerbsContext>* out) = 0;
};

/// The real implementation (verbs_ibv.cc; only in builds with libibverbs).
std::unique_ptr<Verbs> makeIbverbs();

}  // namespace rdma
}  // namespace chorus
