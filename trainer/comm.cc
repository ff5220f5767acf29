#include "trainer/comm.h"

#include <chrono>
#include <stdexcept>
#include <string>

namespace trainer {
namespace {

// Under a launcher (chorusGetLaunchInfo: the library's own table) the environment route
// joins the job; without one the trainer runs alone.
chorusResult_t join(chorusComm_t* comm, const char** how) {
  const char* launcher = nullptr;
  chorusResult_t r = chorusGetLaunchInfo(&launcher, nullptr, nullptr);
  if (r != chorusSuccess) return r;
  if (launcher) {
    *how = "env";
    return chorusCommInitFromEnv(comm, nullptr);
  }
  *how = "single";
  chorusUniqueId id;
  r = chorusGetUniqueId(&id);
  if (r != chorusSuccess) return r;
  return chorusCommInitRank(comm, 1, id, 0);
}

}  // namespace

Comm::Comm() {
  chorusResult_t r = join(&comm_, &how_);
  if (r != chorusSuccess)
    throw std::runtime_error(std::string("joining the job failed: ") + chorusGetErrorString(r) +
                             " (" + chorusGetLastError(nullptr) + ")");
  check(chorusCommUserRank(comm_, &rank_), "chorusCommUserRank");
  check(chorusCommCount(comm_, &size_), "chorusCommCount");
  check(chorusStreamCreate(&stream_), "chorusStreamCreate");
}

Comm::Comm(Comm& parent, int color, int key, const char* how) : how_(how) {
  rank_ = parent.rank_;  // for error messages until the split is done
  chorusResult_t r = chorusCommSplit(parent.comm_, color, key, &comm_, nullptr);
  if (r != chorusSuccess || !comm_)
    throw std::runtime_error(std::string("chorusCommSplit (") + how + ") failed on rank " +
                             std::to_string(parent.rank_) + ": " + chorusGetErrorString(r) + " (" +
                             chorusGetLastError(parent.comm_) + ")");
  check(chorusCommUserRank(comm_, &rank_), "chorusCommUserRank");
  check(chorusCommCount(comm_, &size_), "chorusCommCount");
  check(chorusStreamCreate(&stream_), "chorusStreamCreate");
}

Comm::~Comm() {
  if (stream_) chorusStreamDestroy(stream_);
  if (comm_) {
    chorusCommFinalize(comm_);
    chorusCommDestroy(comm_);
  }
}

void Comm::check(chorusResult_t r, const char* what) {
  if (r == chorusSuccess) return;
  throw std::runtime_error(std::string(what) + " failed on rank " + std::to_string(rank_) + ": " +
                           chorusGetErrorString(r) + " (" + chorusGetLastError(comm_) + ")");
}

void Comm::allReduceAsync(void* buf, size_t count, chorusDataType_t type, chorusRedOp_t op) {
  ++allReduceCalls_;
  check(chorusAllReduce(buf, buf, count, type, op, comm_, stream_), "chorusAllReduce");
}

bool Comm::idle() {
  chorusResult_t r = chorusStreamQuery(stream_);
  if (r == chorusInProgress) return false;
  check(r, "chorusStreamQuery");
  return true;
}

void Comm::wait() {
  auto start = std::chrono::steady_clock::now();
  chorusResult_t r = chorusStreamSynchronize(stream_);
  waitSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  check(r, "a collective on the training stream");
}

void Comm::allReduce(void* buf, size_t count, chorusDataType_t type, chorusRedOp_t op) {
  allReduceAsync(buf, count, type, op);
  wait();
}

void Comm::broadcast(void* buf, size_t count, chorusDataType_t type, int root) {
  check(chorusBroadcast(buf, buf, count, type, root, comm_, stream_), "chorusBroadcast");
  wait();
}

void Comm::allGather(const void* send, void* recv, size_t countPerRank, chorusDataType_t type) {
  check(chorusAllGather(send, recv, countPerRank, type, comm_, stream_), "chorusAllGather");
  wait();
}

void Comm::barrier() {
  check(chorusBarrier(comm_, stream_), "chorusBarrier");
  wait();
}

void Comm::sendRecv(const void* send, size_t sendCount, int sendPeer, void* recv, size_t recvCount,
                    int recvPeer, chorusDataType_t type, const char* what) {
  if (sendPeer < 0 && recvPeer < 0) return;
  check(chorusGroupStart(), "chorusGroupStart");
  chorusResult_t r = chorusSuccess;
  if (sendPeer >= 0) r = chorusSend(send, sendCount, type, sendPeer, comm_, stream_);
  if (r == chorusSuccess && recvPeer >= 0)
    r = chorusRecv(recv, recvCount, type, recvPeer, comm_, stream_);
  chorusResult_t end = chorusGroupEnd();
  check(r, what);
  check(end, what);
  wait();
}

void Comm::exchange(const std::vector<P2p>& ops, const char* what) {
  if (ops.empty()) return;
  check(chorusGroupStart(), "chorusGroupStart");
  chorusResult_t r = chorusSuccess;
  for (const P2p& op : ops) {
    if (r != chorusSuccess) break;
    r = op.send ? chorusSend(op.buf, op.count, op.type, op.peer, comm_, stream_)
                : chorusRecv(op.buf, op.count, op.type, op.peer, comm_, stream_);
  }
  chorusResult_t end = chorusGroupEnd();
  check(r, what);
  check(end, what);
  wait();
}

int Comm::recvAny(void* buf, size_t count, chorusDataType_t type, const char* what) {
  int peer = -1;
  check(chorusRecvAnySource(buf, count, type, &peer, comm_, stream_), what);
  wait();
  return peer;
}

}  // namespace trainer
