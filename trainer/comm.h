// comm.h — the trainer's one door to Chorus: every byte that crosses ranks goes through here.
//
// All collectives go onto one host stream, in program order, so that asynchronous bucket
// all-reduces (queued from autograd hooks during backward) and blocking collectives (sync
// batch norm, evaluation, checkpoints) can never run concurrently on the communicator or
// in a different order on different ranks. Blocking calls are "queue, then wait"; time
// spent waiting is what the epoch line reports as communication time. Errors become
// std::runtime_error carrying chorusGetLastError's text.
#pragma once

#include <chorus.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainer {

class Comm {
 public:
  /// Joins the job: under a launcher (chorusGetLaunchInfo: chorusrun, torchrun, mpirun,
  /// Slurm) through chorusCommInitFromEnv, else alone.
  Comm();
  ~Comm();
  /// A sub-communicator of `parent` (chorusCommSplit, collective over parent): the ranks
  /// with the same color, ordered by key. For the hybrid layout's DP, PP and TP groups.
  Comm(Comm& parent, int color, int key, const char* how);
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// How the communicator was formed ("env", "single").
  const char* how() const { return how_; }

  /// Queues an in-place all-reduce; `buf` must not be touched until wait().
  void allReduceAsync(void* buf, size_t count, chorusDataType_t type, chorusRedOp_t op);
  /// True when everything queued so far has finished (never blocks).
  bool idle();
  /// Waits for everything queued so far.
  void wait();

  void allReduce(void* buf, size_t count, chorusDataType_t type, chorusRedOp_t op);
  void broadcast(void* buf, size_t count, chorusDataType_t type, int root);
  void allGather(const void* send, void* recv, size_t countPerRank, chorusDataType_t type);
  void barrier();
  /// Point to point, one group: sends `sendCount` elements to `sendPeer` and receives
  /// `recvCount` from `recvPeer` (either peer may be -1: none), then waits. Pipeline stages
  /// pair these calls so that a send and a receive between two stages never wait on each
  /// other. `what` names the transfer in errors.
  void sendRecv(const void* send, size_t sendCount, int sendPeer, void* recv, size_t recvCount,
                int recvPeer, chorusDataType_t type, const char* what);

  /// Parameter-server mode (ps_train.cc): one group of point-to-point operations, then a
  /// wait. Sends and receives progress together, so any mix completes without deadlock.
  struct P2p {
    bool send = true;
    void* buf = nullptr;  // a send only reads it
    size_t count = 0;
    chorusDataType_t type = chorusFloat64;
    int peer = 0;
  };
  void exchange(const std::vector<P2p>& ops, const char* what);
  /// Receives `count` elements from whichever rank sends first (chorusRecvAnySource),
  /// waits, and returns that rank.
  int recvAny(void* buf, size_t count, chorusDataType_t type, const char* what);

  /// --elastic (defined in trainer/elastic.cc): after a collective failed, agrees with the
  /// other survivors on the lost ranks and shrinks the communicator to the survivors (rank
  /// and size change). Returns the lost ranks (old numbering); empty: none lost, unchanged.
  /// `agreeSeconds`: the chorusCommFailedRanks part (it waits for the slowest survivor to
  /// notice the loss), `shrinkSeconds`: chorusCommShrink (both may be null).
  std::vector<int> shrinkToSurvivors(double* agreeSeconds, double* shrinkSeconds);

  /// All-reduces issued so far (asynchronous and blocking).
  uint64_t allReduceCalls() const { return allReduceCalls_; }
  /// Seconds this thread has spent blocked waiting for communication.
  double waitSeconds() const { return waitSeconds_; }

 private:
  void check(chorusResult_t r, const char* what);

  chorusComm_t comm_ = nullptr;
  chorusStream_t stream_ = nullptr;
  int rank_ = 0, size_ = 1;
  const char* how_ = "";
  uint64_t allReduceCalls_ = 0;
  double waitSeconds_ = 0;
};

}  // namespace trainer
