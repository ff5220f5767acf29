// proxied/progress_thread.h — the skeleton of a transport's progress thread (tcp, rdma).
//
// One thread per communicator drives every channel of the transport. What the two
// transports share lives here: the thread itself, an epoll set with an eventfd that
// application threads write only while the thread sleeps (kick: one flag store when it is
// busy), a command mailbox (channels to activate, stop), the kick scan, and shutdown (stop
// at once, or drain until every healthy channel has delivered what was posted, up to a
// deadline). A transport derives from it, supplies the work (loop, onKick, drained) and
// calls the pieces from its loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "chorus.h"
#include "src/core/wait.h"
#include "src/net/socket.h"
#include "transports/proxied/channel_health.h"

namespace chorus {
namespace proxied {

/// A channel a progress thread drives: its health plus the application's kick flag.
struct ProxiedChannel : ChannelHealth {
  using ChannelHealth::ChannelHealth;
  /// Raised by the application to get the progress thread's attention (see kick()).
  std::atomic<bool> kicked{false};
};

class ProgressThread {
 public:
  /// `rank` names the thread's log lines; `what` ("TCP", "RDMA") its errors.
  ProgressThread(int rank, const char* what) : rank_(rank), what_(what) {}
  /// A subclass must stop() in its own destructor (the thread runs the subclass's loop).
  virtual ~ProgressThread() = default;
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  /// Hands a channel (ready to carry traffic) to the thread.
  void activate(ProxiedChannel* c);
  /// Gets the thread's attention for `c` (new slot posted, or a slot freed). Cheap unless
  /// the thread sleeps.
  void kick(ProxiedChannel* c) {
    c->kicked.store(true, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) wake();
  }
  /// Stops the thread. With `drain`, first keeps going until every healthy channel has
  /// delivered what was posted (or `deadlineNs`), so a rank may post its last message and
  /// leave, as it can with shared memory.
  void stop(bool drain, int64_t deadlineNs);

  Doorbell* bell() { return &bell_; }

 protected:
  enum Mode { kRun = 0, kDrain = 1, kStop = 2 };

  /// Creates the epoll set and the wake eventfd (registered with `eventTag` as its data).
  chorusResult_t open(void* eventTag);
  /// Adds `fd` to the epoll set; false (errno set) on failure.
  bool watch(int fd, uint32_t events, void* tag);
  /// Starts the thread running loop().
  chorusResult_t launch();

  /// Posts a command: `set` runs under the mailbox lock, then the thread is woken.
  void post(const std::function<void()>& set);
  /// Thread: takes the mailbox if a command was posted (or `force`): returns the channels
  /// to activate (already appended to channels()) and applies a stop request to mode();
  /// `take` runs under the lock for a subclass's own commands.
  std::vector<ProxiedChannel*> takeCommands(bool force = false,
                                            const std::function<void()>& take = nullptr);
  /// Thread: calls onKick for every kicked channel; true if any was.
  bool runKicks();
  /// Thread: true once the loop must end (stop, or drain done or past its deadline; then
  /// every channel still holding posted messages is reported through undrained()).
  bool finished();
  /// Thread: announces that it may sleep and looks once more for commands and kicks (a
  /// kick that saw it awake must be visible here: both sides use seq_cst). True: nothing is
  /// pending, sleep; either way call awake() afterwards.
  bool maySleep();
  void awake() { sleeping_.store(false, std::memory_order_relaxed); }
  /// Thread: empties the wake eventfd.
  void drainWakeups();

  virtual void loop() = 0;
  virtual void onKick(ProxiedChannel* c) = 0;
  /// Whether `c` has delivered everything posted to it (drain).
  virtual bool drained(const ProxiedChannel* c) const = 0;
  /// Drain ran out of time with `c` still holding messages: say so.
  virtual void undrained(const ProxiedChannel* c) = 0;

  int epollFd() const { return epoll_.get(); }
  int eventFd() const { return event_.get(); }
  int mode() const { return mode_; }
  const std::vector<ProxiedChannel*>& channels() const { return channels_; }

 private:
  void wake();

  const int rank_;
  const char* const what_;
  Doorbell bell_{};
  Fd epoll_, event_;
  std::thread thread_;
  std::atomic<bool> sleeping_{false};

  // Commands from other threads.
  std::mutex mu_;
  std::vector<ProxiedChannel*> toActivate_;
  int stopMode_ = kRun;
  int64_t stopDeadline_ = 0;
  std::atomic<bool> commandPending_{false};

  // Thread only.
  std::vector<ProxiedChannel*> channels_;
  int mode_ = kRun;
  int64_t deadline_ = 0;
};

}  // namespace proxied
}  // namespace chorus
