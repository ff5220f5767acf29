// rdma/proxy.h — the progress thread of one communicator's RDMA transport.
//
// The HCA moves the bytes, but someone must post the writes of newly posted slots, repost
// receives, turn completions into counters the application waits on, and return freed
// FIFO slots to the peers as credits. One thread per communicator does all of it, like the
// tcp transport's proxy: it polls the shared completion queue while there is work, then
// arms the completion channel and sleeps in epoll on it and on an eventfd that application
// threads write to only when the thread sleeps (Proxy::kick).
#pragma once

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "src/net/socket.h"
#include "src/core/wait.h"
#include "transports/rdma/channel.h"
#include "transports/rdma/reg_cache.h"

namespace chorus {
namespace rdma {

class Proxy {
 public:
  /// `maxWrite`: the largest single write (messages above it go in pieces).
  Proxy(int rank, int nranks, VerbsContext* ctx, size_t regCacheBytes, uint64_t maxWrite);
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  chorusResult_t start();
  /// Hands a connected channel (queue pair in RTS, receives posted) to the thread.
  void activate(Channel* c);
  void kick(Channel* c) {
    c->kicked.store(true, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) wake();
  }
  /// Stops the thread; with `drain`, first until every healthy channel's posted messages
  /// have completed (or `deadlineNs`).
  void stop(bool drain, int64_t deadlineNs);

  Doorbell* bell() { return &bell_; }
  /// Registration cache counters (read after stop(), or racy but harmless for logs).
  const RegCache& regCache() const { return cache_; }

 private:
  void loop();
  void wake();
  /// `force`: look at the queue even if no command was flagged (see onCompletion).
  void runCommands(bool force = false);
  bool runKicks();
  bool pollOnce();
  void onCompletion(const Completion& wc);
  void progressSend(Channel* c);
  void progressCredits(Channel* c);
  void publishFree(Channel* c);
  bool allDrained() const;
  void failAll(const std::string& msg);

  const int rank_;
  VerbsContext* const ctx_;
  RegCache cache_;
  const uint64_t maxWrite_;
  Doorbell bell_{};

  Fd epoll_, event_;
  std::thread thread_;
  std::atomic<bool> sleeping_{false};

  std::mutex mu_;
  std::vector<Channel*> toActivate_;
  int stopMode_ = 0;  // 0 run, 1 drain then stop, 2 stop
  int64_t stopDeadline_ = 0;
  std::atomic<bool> commandPending_{false};

  // Thread only.
  std::vector<Channel*> channels_;
  std::vector<Channel*> byPeer_;
  std::vector<Channel*> regWaiters_;  // could not register their send buffer yet
  int mode_ = 0;
  int64_t deadline_ = 0;
};

}  // namespace rdma
}  // namespace chorus
