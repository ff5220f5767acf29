// progress_thread.cc — the shared skeleton: thread, wake eventfd, mailbox, kicks, shutdown.
#include "transports/proxied/progress_thread.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <exception>

#include "src/core/checks.h"
#include "src/core/debug.h"

namespace chorus {
namespace proxied {

chorusResult_t ProgressThread::open(void* eventTag) {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_.valid()) CHORUS_FAIL(chorusSystemError, "epoll_create1: %s", strerror(errno));
  event_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!event_.valid()) CHORUS_FAIL(chorusSystemError, "eventfd: %s", strerror(errno));
  if (!watch(event_.get(), EPOLLIN, eventTag))
    CHORUS_FAIL(chorusSystemError, "epoll_ctl(ADD fd %d): %s", event_.get(), strerror(errno));
  return chorusSuccess;
}

bool ProgressThread::watch(int fd, uint32_t events, void* tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = tag;
  return ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) == 0;
}

chorusResult_t ProgressThread::launch() {
  try {
    thread_ = std::thread([this] {
      setLogRank(rank_);
      loop();
    });
  } catch (const std::exception& e) {
    CHORUS_FAIL(chorusSystemError, "cannot start the %s progress thread: %s", what_, e.what());
  }
  return chorusSuccess;
}

void ProgressThread::wake() {
  uint64_t one = 1;
  ssize_t r = ::write(event_.get(), &one, sizeof(one));
  (void)r;  // EAGAIN means the counter is already non-zero: the thread wakes anyway
}

void ProgressThread::post(const std::function<void()>& set) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    set();
  }
  commandPending_.store(true, std::memory_order_seq_cst);
  wake();
}

void ProgressThread::activate(ProxiedChannel* c) {
  post([&] { toActivate_.push_back(c); });
}

void ProgressThread::stop(bool drain, int64_t deadlineNs) {
  if (!thread_.joinable()) return;
  post([&] {
    stopMode_ = drain ? kDrain : kStop;
    stopDeadline_ = deadlineNs;
  });
  thread_.join();
}

std::vector<ProxiedChannel*> ProgressThread::takeCommands(bool force,
                                                          const std::function<void()>& take) {
  std::vector<ProxiedChannel*> act;
  if (!commandPending_.exchange(false, std::memory_order_acq_rel) && !force) return act;
  {
    std::lock_guard<std::mutex> lock(mu_);
    act.swap(toActivate_);
    if (take) take();
    if (stopMode_ > mode_) {
      mode_ = stopMode_;
      deadline_ = stopDeadline_;
    }
  }
  channels_.insert(channels_.end(), act.begin(), act.end());
  return act;
}

bool ProgressThread::runKicks() {
  bool any = false;
  for (ProxiedChannel* c : channels_) {
    // The exchange reads the latest kick, so what that kicker published before it (a slot,
    // a release) is visible to onKick.
    if (!c->kicked.load(std::memory_order_relaxed)) continue;
    if (!c->kicked.exchange(false, std::memory_order_acq_rel)) continue;
    any = true;
    onKick(c);
  }
  return any;
}

bool ProgressThread::finished() {
  if (mode_ == kStop) return true;
  if (mode_ != kDrain) return false;
  bool all = true;
  for (const ProxiedChannel* c : channels_) all = all && (!c->healthy() || drained(c));
  if (all) return true;
  if (nowNs() < deadline_) return false;
  for (const ProxiedChannel* c : channels_)
    if (c->healthy() && !drained(c)) undrained(c);
  return true;
}

bool ProgressThread::maySleep() {
  sleeping_.store(true, std::memory_order_seq_cst);
  bool pending = commandPending_.load(std::memory_order_seq_cst);
  for (const ProxiedChannel* c : channels_)
    pending = pending || c->kicked.load(std::memory_order_seq_cst);
  return !pending;
}

void ProgressThread::drainWakeups() {
  uint64_t v;
  while (::read(event_.get(), &v, sizeof(v)) > 0) {
  }
}

}  // namespace proxied
}  // namespace chorus
