// rdma/proxy.h — the progress thread of one communicator's RDMA transport.
//
// The HCA moves the bytes, but someone must post the writes of newly posted slots, repost
// receives, turn completions into counters the application waits on, and return freed
// FIFO slots to the peers as credits. One thread per communicator does all of it, like the
// tcp transport's proxy: it polls the shared completion queue while there is work, then
// arms the completion channel and sleeps in epoll on it and on an eventfd that application
// threads write to only when the thread sleeps (kick). The thread, its mailbox, kicks and
// shutdown are proxied::ProgressThread's.
#pragma once

#include <string>
#include <vector>

#include "transports/proxied/progress_thread.h"
#include "transports/rdma/channel.h"
#include "transports/rdma/reg_cache.h"

namespace chorus {
namespace rdma {

/// activate() takes a connected channel (queue pair in RTS, receives posted); drain
/// (stop) lasts until every healthy channel's posted messages have completed.
class Proxy final : public proxied::ProgressThread {
 public:
  /// `maxWrite`: the largest single write (messages above it go in pieces).
  Proxy(int rank, int nranks, VerbsContext* ctx, size_t regCacheBytes, uint64_t maxWrite);
  ~Proxy() override { stop(false, 0); }

  chorusResult_t start();
  /// Registration cache counters (read after stop(), or racy but harmless for logs).
  const RegCache& regCache() const { return cache_; }

 private:
  void loop() override;
  void onKick(proxied::ProxiedChannel* c) override;
  bool drained(const proxied::ProxiedChannel* c) const override;
  void undrained(const proxied::ProxiedChannel* c) override;
  /// `force`: look at the queue even if no command was flagged (see onCompletion).
  void runCommands(bool force = false);
  bool pollOnce();
  void onCompletion(const Completion& wc);
  void progressSend(Channel* c);
  void progressCredits(Channel* c);
  void publishFree(Channel* c);
  void failAll(const std::string& msg);

  VerbsContext* const ctx_;
  RegCache cache_;
  const uint64_t maxWrite_;

  // Thread only.
  std::vector<Channel*> byPeer_;
  std::vector<Channel*> regWaiters_;  // could not register their send buffer yet
};

}  // namespace rdma
}  // namespace chorus
