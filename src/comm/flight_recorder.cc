// flight_recorder.cc — the ring of recent operations and its JSON dump (see the header).
#include "src/comm/flight_recorder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "src/comm/comm.h"
#include "src/core/debug.h"
#include "src/core/params.h"
#include "src/core/coll.h"

namespace chorus {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;

// Timestamps come from the coarse monotonic clock: its resolution (a few milliseconds) is
// plenty to order and age the operations of a hang, and it costs ~5-10 ns where a precise
// read costs 20-30 ns on a virtual machine (rdtsc alone ~12 ns). A blocking collective reads
// it once (begin), a queued operation twice (enqueue, start), and a failure once more; a
// success is not timed (its end lies between its start and the next operation's).
int64_t frNow() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

void jsonString(std::string* out, const std::string& s) {
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          *out += b;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

const char* stateName(FrState s) {
  switch (s) {
    case FrState::Enqueued: return "enqueued";
    case FrState::Started: return "started";
    case FrState::Completed: return "completed";
    case FrState::Failed: return "failed";
  }
  return "?";
}

// Short, stable names for the dump (chorusGetErrorString's sentences are for people).
const char* resultName(int r) {
  static const char* const kNames[] = {
      "success",       "unhandled_error", "system_error", "internal_error", "invalid_argument",
      "invalid_usage", "remote_error",    "in_progress",  "timeout",        "aborted"};
  return r >= 0 && r < chorusNumResults ? kNames[r] : "unknown";
}

// meta: coll | type << 8 | (state | flags) << 16 | result << 24 | op << 32, one store.
constexpr uint64_t kStartAtEnqueue = 0x10;  // flag: started when recorded (tStart is tEnq)
constexpr uint64_t kStartStored = 0x20;     // flag: tStart holds the start time
uint64_t pack(int coll, int type, FrState s, uint64_t flags, int op) {
  return (static_cast<uint64_t>(coll) & 0xff) | (static_cast<uint64_t>(type) & 0xff) << 8 |
         (static_cast<uint64_t>(s) | flags) << 16 |
         static_cast<uint64_t>(static_cast<uint32_t>(op)) << 32;
}
uint64_t withState(uint64_t meta, FrState s, int result) {
  return (meta & ~0xff0f0000ull) | static_cast<uint64_t>(s) << 16 |
         (static_cast<uint64_t>(result) & 0xff) << 24;
}
FrState stateOf(uint64_t meta) { return static_cast<FrState>((meta >> 16) & 0x0f); }

bool isP2p(int coll) {
  return coll == static_cast<int>(Coll::Send) || coll == static_cast<int>(Coll::Recv);
}
}  // namespace

const char* frCollName(int coll) {
  if (coll < 0 || coll > static_cast<int>(Coll::Recv)) return "?";
  return collName(static_cast<Coll>(coll));
}

const char* frTypeName(int type) {
  static const char* const kNames[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                       "uint64", "float16", "float32", "float64", "bfloat16"};
  return type >= 0 && type < chorusNumTypes ? kNames[type] : "?";
}

std::string frOpName(int op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  if (op >= 0 && op < chorusNumOps) return kNames[op];
  if (op >= chorusNumOps) return "premulsum(" + std::to_string(op) + ")";
  return "-";
}

static size_t roundUpPow2(size_t n) {
  size_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

FlightRecorder::FlightRecorder(size_t capacity)
    : cap_(capacity ? roundUpPow2(capacity) : 0),
      mask_(cap_ ? cap_ - 1 : 0),
      ring_(cap_ ? new Entry[cap_] : nullptr) {}

uint64_t FlightRecorder::record(int coll, int type, size_t count, int op, int root, uint64_t seq,
                                FrState state, bool startsNow) {
  if (cap_ == 0) return 0;
  // Not a read-modify-write: calls on one communicator come from one thread at a time (as
  // in NCCL; the stream worker never enqueues). Were two threads to race here anyway, two
  // calls would share an entry: a garbled record, never a memory error.
  const uint64_t id = next_.load(kRelaxed) + 1;
  next_.store(id, kRelaxed);
  Entry& e = ring_[(id - 1) & mask_];
  // Invalidate first, so a concurrent dump never pairs the new fields with the old id.
  e.id.store(0, kRelaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const int64_t t = frNow();
  e.seq.store(seq, kRelaxed);
  e.count.store(count, kRelaxed);
  e.tEnq.store(t, kRelaxed);  // tStart and tEnd are not written: see the flags and finish()
  e.root.store(root, kRelaxed);
  e.wait.store(-1, kRelaxed);
  e.meta.store(pack(coll, type, state, startsNow ? kStartAtEnqueue : 0, op), kRelaxed);
  e.id.store(id, std::memory_order_release);
  return id;
}

uint64_t FlightRecorder::enqueue(int coll, int type, size_t count, int op, int root,
                                 bool startsNow) {
  return record(coll, type, count, op, root, 0, FrState::Enqueued, startsNow);
}

uint64_t FlightRecorder::begin(int coll, int type, size_t count, int op, int root, uint64_t seq) {
  return record(coll, type, count, op, root, seq, FrState::Started, true);
}

void FlightRecorder::start(uint64_t id, uint64_t seq) {
  Entry* e = entry(id);
  if (!e) return;
  e->seq.store(seq, kRelaxed);
  uint64_t m = e->meta.load(kRelaxed);
  if (!(m & (kStartAtEnqueue | kStartStored) << 16)) {
    e->tStart.store(frNow(), kRelaxed);
    m |= kStartStored << 16;
  }
  e->meta.store(withState(m, FrState::Started, chorusSuccess), std::memory_order_release);
}

void FlightRecorder::finish(uint64_t id, chorusResult_t r) {
  Entry* e = entry(id);
  if (!e) return;
  const uint64_t m = e->meta.load(kRelaxed);
  const FrState s = stateOf(m);
  if (s == FrState::Completed || s == FrState::Failed) return;
  if (r == chorusSuccess) {  // not timed (see frNow); tEnd is read only for a failure
    e->meta.store(withState(m, FrState::Completed, r), kRelaxed);
    return;
  }
  e->tEnd.store(frNow(), kRelaxed);
  e->meta.store(withState(m, FrState::Failed, r), std::memory_order_release);
}

void FlightRecorder::noteWait(uint64_t id, int peer, bool send) {
  Entry* e = entry(id);
  if (e) e->wait.store((peer << 1) | (send ? 1 : 0), kRelaxed);
}

std::atomic<int32_t>* FlightRecorder::waitSlot(uint64_t id) {
  Entry* e = entry(id);
  return e ? &e->wait : &dummyWait_;
}

std::vector<FrRecord> FlightRecorder::snapshot() const {
  std::vector<FrRecord> out;
  if (cap_ == 0) return out;
  const uint64_t last = next_.load(std::memory_order_acquire);
  const uint64_t first = last > cap_ ? last - cap_ + 1 : 1;
  out.reserve(static_cast<size_t>(last - first + 1));
  for (uint64_t id = first; id <= last; ++id) {
    const Entry& e = ring_[(id - 1) & mask_];
    if (e.id.load(std::memory_order_acquire) != id) continue;  // not written yet, or reused
    FrRecord r;
    r.id = id;
    r.seq = e.seq.load(kRelaxed);
    // Acquire: a start or failure time written before the state that says it is there.
    const uint64_t m = e.meta.load(std::memory_order_acquire);
    r.coll = static_cast<int>(m & 0xff);
    r.type = static_cast<int>((m >> 8) & 0xff);
    r.state = stateOf(m);
    r.result = static_cast<int>((m >> 24) & 0xff);
    r.op = static_cast<int32_t>(static_cast<uint32_t>(m >> 32));
    r.root = e.root.load(kRelaxed);
    r.count = e.count.load(kRelaxed);
    const int32_t w = e.wait.load(kRelaxed);
    r.waitPeer = w < 0 ? -1 : (w >> 1);
    r.waitSend = w >= 0 && (w & 1);
    r.tEnqueueNs = e.tEnq.load(kRelaxed);
    const uint64_t flags = (m >> 16) & 0xf0;
    r.tStartNs = flags & kStartAtEnqueue ? r.tEnqueueNs
                 : flags & kStartStored  ? e.tStart.load(kRelaxed)
                                         : 0;
    r.tEndNs = r.state == FrState::Failed ? e.tEnd.load(kRelaxed) : 0;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.id.load(kRelaxed) != id) continue;  // overwritten while we read it
    out.push_back(r);
  }
  return out;
}

std::string FlightRecorder::dump(const chorusComm* comm, const std::string& dir, const char* reason,
                                 const char* detail) {
  if (cap_ == 0 || dir.empty()) return "";
  std::lock_guard<std::mutex> lock(dumpMutex_);
  const std::vector<FrRecord> recs = snapshot();
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  std::string lastError = detail ? detail : "";
  if (lastError.empty()) {
    auto* c = const_cast<chorusComm*>(comm);  // errorMutex is mutable state, not the comm's
    std::lock_guard<std::mutex> el(c->errorMutex);
    lastError = c->lastError;
  }
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016" PRIx64, comm->commHash);

  std::string j;
  j.reserve(256 + recs.size() * 256);
  char b[512];
  j += "{\n  \"format\": \"chorus-flight-recorder/1\",\n  \"comm_hash\": \"";
  j += hash;
  j += "\",\n  \"comm_name\": ";
  jsonString(&j, comm->name);
  std::snprintf(b, sizeof b,
                ",\n  \"rank\": %d,\n  \"nranks\": %d,\n  \"pid\": %d,\n  \"host\": ", comm->rank,
                comm->nranks, static_cast<int>(getpid()));
  j += b;
  jsonString(&j, host);
  j += ",\n  \"reason\": ";
  jsonString(&j, reason ? reason : "");
  std::snprintf(
      b, sizeof b,
      ",\n  \"dump_monotonic_ns\": %" PRId64 ",\n  \"dump_unix_ns\": %" PRId64
      ",\n  \"last_collective_seq\": %" PRIu64 ",\n  \"last_p2p_seq\": %" PRIu64
      ",\n  \"capacity\": %zu,\n  \"recorded\": %" PRIu64 ",\n  \"last_error\": ",
      frNow(),
      static_cast<int64_t>(static_cast<int64_t>(wall.tv_sec) * 1000000000ll + wall.tv_nsec),
      comm->opCount, comm->p2pCount, cap_, next_.load(kRelaxed));
  j += b;
  jsonString(&j, lastError);
  j += ",\n  \"ops\": [";
  for (size_t i = 0; i < recs.size(); ++i) {
    const FrRecord& r = recs[i];
    std::snprintf(b, sizeof b,
                  "%s\n    {\"id\": %" PRIu64 ", \"seq\": %" PRIu64
                  ", \"kind\": \"%s\", \"coll\": \"%s\", \"type\": \"%s\", \"count\": %" PRIu64
                  ", \"op\": \"%s\", \"root\": %d, \"state\": \"%s\", \"result\": \"%s\"",
                  i ? "," : "", r.id, r.seq, isP2p(r.coll) ? "p2p" : "coll", frCollName(r.coll),
                  frTypeName(r.type), r.count, frOpName(r.op).c_str(), r.root, stateName(r.state),
                  resultName(r.result));
    j += b;
    std::snprintf(b, sizeof b,
                  ", \"wait_peer\": %d, \"wait_for\": \"%s\", \"t_enqueue_ns\": %" PRId64
                  ", \"t_start_ns\": %" PRId64 ", \"t_end_ns\": %" PRId64 "}",
                  r.waitPeer, r.waitPeer < 0 ? "" : (r.waitSend ? "space" : "data"), r.tEnqueueNs,
                  r.tStartNs, r.tEndNs);
    j += b;
  }
  j += recs.empty() ? "]\n}\n" : "\n  ]\n}\n";

  mkdir(dir.c_str(), 0777);  // the common case: it exists (EEXIST); any other error shows below
  std::snprintf(b, sizeof b, "/chorus-fr-%s-rank%d.json", hash, comm->rank);
  const std::string path = dir + b;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    CHORUS_WARN(kLogColl, "flight recorder: cannot create %s: %s", tmp.c_str(),
                std::strerror(errno));
    return "";
  }
  size_t off = 0;
  while (off < j.size()) {
    const ssize_t w = write(fd, j.data() + off, j.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  close(fd);
  if (off != j.size() || rename(tmp.c_str(), path.c_str()) != 0) {
    CHORUS_WARN(kLogColl, "flight recorder: cannot write %s: %s", path.c_str(),
                std::strerror(errno));
    unlink(tmp.c_str());
    return "";
  }
  return path;
}

void frDumpIfConfigured(const chorusComm* comm, const char* reason, bool loud, const char* detail) {
  if (!comm || !comm->flight) return;
  const std::string& dir = paramString(Param::FlightRecorderDir);
  if (dir.empty()) return;
  const std::string path = comm->flight->dump(comm, dir, reason, detail);
  if (path.empty()) return;
  if (loud)
    CHORUS_WARN(kLogColl, "flight recorder (%s): wrote %s", reason, path.c_str());
  else
    CHORUS_INFO(kLogColl, "flight recorder (%s): wrote %s", reason, path.c_str());
}

}  // namespace chorus
