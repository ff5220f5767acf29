// chorusrun: start N ranks of a command for one Chorus job (mpirun-style), on
// this machine or across hosts.
//
// Shape of the program:
//   1. parse options (options.cc; hosts and the rank mapping in hosts.cc), make
//      a random secret (src/bootstrap/launcher.h, the library's one window
//      here), and either pick a free port for rank 0 (no hosts given:
//      rank 0 serves the bootstrap root) or serve the root here (hosts given:
//      rank 0 may be anywhere, so chorusrun serves it and says so with
//      CHORUS_INIT_SERVED=1);
//   2. block SIGCHLD/SIGINT/SIGTERM/SIGHUP and read them through a signalfd, so
//      every event (a child exiting, a signal to chorusrun, rank output, a
//      deadline) arrives through a single poll() loop: no busy waiting, no
//      signal handlers, and therefore no global mutable state at all;
//   3. fork each rank into its own process group (so a kill reaches the rank's
//      own children too), with its CHORUS_* environment, and report exec
//      failures through a close-on-exec pipe; a remote rank is the same kind of
//      child, running the launch agent (remote.cc builds its command line);
//   4. loop: drain --tag-output pipes, notice exits, enforce --timeout; the
//      first failure (or a signal, or the timeout) SIGTERMs every rank's
//      process group and SIGKILLs them after a grace period;
//   5. exit with the job's status.
//
// Exits are observed with waitid(WNOWAIT) before a rank is reaped: while the
// dead leader is still a zombie its pid cannot be reused, so signalling its
// process group can only ever reach processes that belong to this job.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "src/bootstrap/launcher.h"
#include "tools/chorusrun/hosts.h"
#include "tools/chorusrun/options.h"
#include "tools/chorusrun/output.h"
#include "tools/chorusrun/remote.h"

#ifndef CHORUSRUN_VERSION
#define CHORUSRUN_VERSION "unknown"
#endif

extern char** environ;

namespace chorusrun {
namespace {

constexpr int64_t kGraceMs = 2000;  // SIGTERM -> SIGKILL
constexpr size_t kReadChunk = 64 * 1024;
// After every rank has exited, read at most this much more from each output
// pipe (a leftover grandchild may keep writing forever).
constexpr size_t kFinalDrainLimit = 4 << 20;

int64_t NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// chorusrun's own diagnostics: one write per line so they never land inside
// another line on a shared stderr.
void Message(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void Message(const char* fmt, ...) {
  char body[1024];
  va_list ap;
  va_start(ap, fmt);
  int m = std::vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  std::string line = "chorusrun: ";
  line.append(body, std::min(static_cast<size_t>(m), sizeof body - 1));
  line += '\n';
  Sink err{STDERR_FILENO, false};
  WriteAll(&err, line.data(), line.size());
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal";
  }
}

// Make sure descriptors 0, 1 and 2 are open, so that pipes and sockets created
// below can never be mistaken for the standard streams.
void EnsureStdFds() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      int nfd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
      if (nfd >= 0 && nfd != fd) {
        dup2(nfd, fd);
        close(nfd);
      }
    }
  }
}

// Binds 127.0.0.1:0, reads the port the kernel picked, and closes the socket.
// Rank 0 binds the same port moments later; the port was free and unbound
// sockets leave no TIME_WAIT behind.
bool PickFreePort(int* port) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  bool ok = bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
            getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  close(s);
  if (ok) *port = ntohs(addr.sin_port);
  return ok;
}

std::string EnvName(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// The parts of the environment shared by all ranks: the launcher's own
// environment, minus every variable chorusrun sets, plus those settings.
// CHORUS_INIT_SERVED is never inherited (a chorusrun started from inside a
// rank must not pass its parent's on): it is there only when set here or by -x.
std::vector<std::string> BaseEnvironment(const std::vector<EnvSetting>& settings) {
  auto overridden = [&](const char* entry) {
    const char* eq = std::strchr(entry, '=');
    size_t len = eq ? static_cast<size_t>(eq - entry) : std::strlen(entry);
    std::string name(entry, len);
    if (name == "CHORUS_INIT_SERVED") return true;
    for (const char* v : kRankVars) {
      if (name == v) return true;
    }
    for (const EnvSetting& s : settings) {
      if (name == s.name) return true;
    }
    return false;
  };
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    if (!overridden(*e)) env.emplace_back(*e);
  }
  // Later settings with the same name win (-x FOO=1 -x FOO=2 gives FOO=2).
  for (size_t i = 0; i < settings.size(); ++i) {
    bool superseded = false;
    for (size_t j = i + 1; j < settings.size(); ++j) {
      if (settings[j].name == settings[i].name) superseded = true;
    }
    if (!superseded) env.push_back(settings[i].name + "=" + settings[i].value);
  }
  return env;
}

struct Rank {
  int rank = 0;
  int host = 0;          // index into Options::hosts (0 without hosts)
  bool remote = false;   // pid is the launch agent for a rank on another host
  pid_t pid = -1;        // also the process group id
  bool running = false;  // started and not yet reaped
  int out_fd = -1;       // --tag-output: read ends of the rank's stdout/stderr pipes
  int err_fd = -1;
  std::unique_ptr<LineTagger> out_tagger;
  std::unique_ptr<LineTagger> err_tagger;
};

// What a child reports through its close-on-exec status pipe when it cannot
// get as far as running the command.
struct ChildFailure {
  int stage;  // kStage*
  int err;    // errno
};
constexpr int kStageStdin = 1;
constexpr int kStageChdir = 2;
constexpr int kStageExec = 3;

class Launcher {
 public:
  explicit Launcher(Options opts) : opts_(std::move(opts)) {}
  ~Launcher();
  int Run();

 private:
  bool Setup();
  bool StartRank(Rank* r);
  bool StartRoot(std::vector<EnvSetting>* settings);
  [[noreturn]] void ChildAfterFork(Rank* r, int out_w, int err_w, int status_w,
                                   char** envp, char** argv);
  std::string Who(const Rank& r) const;  // "rank 3 on host" (host jobs) / "rank 3"
  void EventLoop();
  void HandleSignals();
  void CheckChildren();
  void DrainFd(Rank* r, bool is_err, size_t limit);
  void CloseOutput(Rank* r, bool is_err);
  void BeginTeardown();
  void KillGroup(const Rank& r, int sig);
  void FinalDrain();
  int RunningCount() const;

  Options opts_;
  std::vector<Rank> ranks_;
  std::vector<std::vector<std::string>> rank_env_;  // per rank, owned strings
  std::vector<std::string> base_env_;
  // Remote ranks: the "NAME=VALUE" words of their `env` command (without the
  // per-rank variables), the remote working directory, and the host names.
  std::vector<std::string> remote_env_;
  std::string remote_wdir_;
  Sink out_sink_{STDOUT_FILENO, false};
  Sink err_sink_{STDERR_FILENO, false};

  sigset_t orig_mask_{};
  int sigfd_ = -1;
  int devnull_fd_ = -1;
  bool stdin_to_rank0_ = false;

  bool tearing_down_ = false;
  bool sigkill_sent_ = false;
  int64_t grace_deadline_ms_ = 0;
  int64_t job_deadline_ms_ = 0;  // 0: no --timeout
  int user_signal_ = 0;          // first SIGINT/SIGTERM/SIGHUP received
  int exit_code_ = 0;
  bool exit_code_set_ = false;   // the job's status is decided (first failure, signal, timeout)
};

Launcher::~Launcher() {
  for (Rank& r : ranks_) {
    if (r.out_fd >= 0) close(r.out_fd);
    if (r.err_fd >= 0) close(r.err_fd);
  }
  if (sigfd_ >= 0) close(sigfd_);
  if (devnull_fd_ >= 0) close(devnull_fd_);
}

int Launcher::RunningCount() const {
  int n = 0;
  for (const Rank& r : ranks_) n += r.running ? 1 : 0;
  return n;
}

bool Launcher::Setup() {
  // Writes to a closed stdout must fail with EPIPE, not kill the launcher while
  // ranks are running. Ranks get the default disposition back before exec.
  signal(SIGPIPE, SIG_IGN);

  // Signals come through a signalfd: block them, make sure none of them is
  // ignored (a blocked, ignored signal is discarded instead of queued), except
  // SIGHUP when the caller ignored it on purpose (nohup).
  struct sigaction old_hup {};
  sigaction(SIGHUP, nullptr, &old_hup);
  bool hup_ignored = old_hup.sa_handler == SIG_IGN;
  signal(SIGCHLD, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  if (!hup_ignored) sigaddset(&mask, SIGHUP);
  if (sigprocmask(SIG_BLOCK, &mask, &orig_mask_) != 0) {
    Message("sigprocmask: %s", std::strerror(errno));
    return false;
  }
  sigfd_ = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigfd_ < 0) {
    Message("signalfd: %s", std::strerror(errno));
    return false;
  }

  devnull_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnull_fd_ < 0) {
    Message("cannot open /dev/null: %s", std::strerror(errno));
    return false;
  }
  // Ranks run in their own process groups, i.e. in the background of a
  // terminal: reading the terminal would stop them (SIGTTIN). Rank 0 gets
  // chorusrun's stdin only when it is not a terminal; everyone else reads
  // /dev/null.
  stdin_to_rank0_ = !isatty(STDIN_FILENO);

  // Rendezvous settings shared by every rank (-x may override them).
  std::vector<EnvSetting> settings;
  auto exported = [&](const char* name) {
    for (const EnvSetting& s : opts_.exports) {
      if (s.name == name) return true;
    }
    return false;
  };
  if (!exported("CHORUS_SECRET")) {
    std::string secret;
    if (chorus::launcherNewSecret(&secret) != chorusSuccess) {
      Message("cannot make the job secret (see the message above)");
      return false;
    }
    settings.push_back({"CHORUS_SECRET", secret});
  }
  if (!exported("CHORUS_INIT")) {
    if (opts_.HostMode()) {
      if (!StartRoot(&settings)) return false;
    } else {
      int port = 0;
      if (!PickFreePort(&port)) {
        Message("cannot find a free TCP port on 127.0.0.1: %s", std::strerror(errno));
        return false;
      }
      settings.push_back({"CHORUS_INIT", "tcp://127.0.0.1:" + std::to_string(port)});
    }
  }
  for (const EnvSetting& s : opts_.exports) settings.push_back(s);
  base_env_ = BaseEnvironment(settings);

  if (opts_.AnyRemote()) {
    // What a remote rank's `env` sets: every CHORUS_* variable a local rank
    // would inherit, and everything chorusrun or -x sets (-x VAR has already
    // captured VAR's current value). The rest of chorusrun's environment stays
    // here, as with ssh.
    for (const std::string& e : base_env_) {
      const std::string name = EnvName(e);
      bool set_here = name.rfind("CHORUS_", 0) == 0;
      for (const EnvSetting& st : settings) set_here = set_here || st.name == name;
      if (set_here) remote_env_.push_back(e);
    }
    std::string cwd;
    if (opts_.wdir.empty() || opts_.wdir[0] != '/') {
      std::vector<char> buf(4096);
      while (getcwd(buf.data(), buf.size()) == nullptr) {
        if (errno != ERANGE || buf.size() > (1u << 20)) {
          Message("cannot determine the working directory for remote ranks: %s (use --wdir)",
                  std::strerror(errno));
          return false;
        }
        buf.resize(buf.size() * 2);
      }
      cwd = buf.data();
    }
    if (opts_.wdir.empty()) {
      remote_wdir_ = cwd;
    } else if (opts_.wdir[0] == '/') {
      remote_wdir_ = opts_.wdir;
    } else {
      remote_wdir_ = cwd + "/" + opts_.wdir;
    }
  }

  ranks_.resize(static_cast<size_t>(opts_.np));
  rank_env_.resize(static_cast<size_t>(opts_.np));
  const std::string n = std::to_string(opts_.np);
  for (int i = 0; i < opts_.np; ++i) {
    Rank& rk = ranks_[i];
    rk.rank = i;
    const std::string r = std::to_string(i);
    if (opts_.HostMode()) {
      const Placement& pl = opts_.placements[i];
      rk.host = pl.host;
      rk.remote = !opts_.hosts[pl.host].local;
      rank_env_[i] = {"CHORUS_RANK=" + r, "CHORUS_WORLD_SIZE=" + n,
                      "CHORUS_LOCAL_RANK=" + std::to_string(pl.local_rank),
                      "CHORUS_LOCAL_SIZE=" + std::to_string(opts_.local_sizes[pl.host]),
                      "CHORUS_NODE_RANK=" + std::to_string(pl.host)};
    } else {
      rank_env_[i] = {"CHORUS_RANK=" + r, "CHORUS_WORLD_SIZE=" + n, "CHORUS_LOCAL_RANK=" + r,
                      "CHORUS_LOCAL_SIZE=" + n, "CHORUS_NODE_RANK=0"};
    }
  }
  if (opts_.timeout_s > 0) {
    job_deadline_ms_ = NowMs() + static_cast<int64_t>(std::ceil(opts_.timeout_s * 1000.0));
  }
  return true;
}

// Serves the bootstrap root in this process (a thread of chorusrun, started
// after the signal mask is set so that it never takes our signals) for jobs
// with hosts, and adds CHORUS_INIT / CHORUS_INIT_SERVED to the settings.
// The root authenticates every connection with the job's secret, drops
// strangers after its handshake timeout, and ends once it has served the job's
// ranks; its deadline is far in the future, so it lives as long as chorusrun
// does (the job is bounded by --timeout and by the ranks' own deadlines).
bool Launcher::StartRoot(std::vector<EnvSetting>* settings) {
  RendezvousAddr ra;
  std::string err;
  if (!opts_.rendezvous_addr.empty()) {
    if (!RendezvousFromText(opts_.rendezvous_addr, &ra, &err)) {
      Message("%s", err.c_str());
      return false;
    }
  } else if (!opts_.AnyRemote()) {
    ra.url_host = "127.0.0.1";
    ra.bind_host = "127.0.0.1";
  } else {
    const HostSpec* first = nullptr;
    for (const HostSpec& h : opts_.hosts) {
      if (!h.local) {
        first = &h;
        break;
      }
    }
    if (!RendezvousByRoute(first->name, &ra, &err)) {
      Message("%s", err.c_str());
      return false;
    }
  }
  std::string secret_hex;
  for (const EnvSetting& st : *settings) {
    if (st.name == "CHORUS_SECRET") secret_hex = st.value;
  }
  for (const EnvSetting& st : opts_.exports) {
    if (st.name == "CHORUS_SECRET") secret_hex = st.value;  // -x wins, as in the environment
  }
  int port = 0;
  if (chorus::launcherServeRoot(ra.bind_host, secret_hex, &port) != chorusSuccess) {
    Message("cannot serve the bootstrap root on %s (see the message above)", ra.bind_host.c_str());
    return false;
  }
  settings->push_back({"CHORUS_INIT", "tcp://" + ra.url_host + ":" + std::to_string(port)});
  settings->push_back({"CHORUS_INIT_SERVED", "1"});
  return true;
}

std::string Launcher::Who(const Rank& r) const {
  if (!opts_.HostMode()) return "rank " + std::to_string(r.rank);
  return "rank " + std::to_string(r.rank) + " on " + opts_.hosts[r.host].name;
}

void Launcher::ChildAfterFork(Rank* r, int out_w, int err_w, int status_w, char** envp,
                              char** argv) {
  // Only async-signal-safe calls from here on (plus execvp).
  auto fail = [&](int stage) {
    ChildFailure f{stage, errno};
    ssize_t ignored = write(status_w, &f, sizeof f);
    (void)ignored;
    _exit(stage == kStageExec && f.err == ENOENT ? 127 : 126);
  };
  setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  sigprocmask(SIG_SETMASK, &orig_mask_, nullptr);

  int in_fd = (r->rank == 0 && stdin_to_rank0_) ? STDIN_FILENO : devnull_fd_;
  if (in_fd != STDIN_FILENO && dup2(in_fd, STDIN_FILENO) < 0) fail(kStageStdin);
  // dup2 clears close-on-exec on the new descriptor; the pipe ends themselves
  // are close-on-exec and vanish at exec.
  if (out_w >= 0 && dup2(out_w, STDOUT_FILENO) < 0) fail(kStageStdin);
  if (err_w >= 0 && dup2(err_w, STDERR_FILENO) < 0) fail(kStageStdin);
  // A launch agent runs in chorusrun's directory; the remote command does the cd.
  if (!r->remote && !opts_.wdir.empty() && chdir(opts_.wdir.c_str()) != 0) fail(kStageChdir);
  environ = envp;  // execvp searches the rank's own PATH
  execvp(argv[0], argv);
  fail(kStageExec);
  _exit(126);  // not reached
}

bool Launcher::StartRank(Rank* r) {
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  int status_pipe[2] = {-1, -1};
  auto close_all = [&]() {
    for (int* p : {out_pipe, err_pipe, status_pipe}) {
      for (int k = 0; k < 2; ++k) {
        if (p[k] >= 0) close(p[k]);
        p[k] = -1;
      }
    }
  };
  if (pipe2(status_pipe, O_CLOEXEC) != 0 ||
      (opts_.tag_output && (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0))) {
    Message("cannot create pipes for rank %d: %s", r->rank, std::strerror(errno));
    close_all();
    return false;
  }

  // Everything the child needs is built before fork.
  std::vector<char*> envp;
  envp.reserve(base_env_.size() + 5);
  for (std::string& s : base_env_) envp.push_back(&s[0]);
  if (!r->remote) {
    for (std::string& s : rank_env_[r->rank]) envp.push_back(&s[0]);
  }
  envp.push_back(nullptr);
  std::vector<std::string> agent_words;
  if (r->remote) {
    // CMD... HOST 'cd WDIR || exit 1; exec env VAR=VALUE... PROGRAM ARGS...'
    std::vector<std::string> env = remote_env_;
    env.insert(env.end(), rank_env_[r->rank].begin(), rank_env_[r->rank].end());
    agent_words = opts_.launch_agent;
    agent_words.push_back(opts_.hosts[r->host].name);
    agent_words.push_back(RemoteCommand(remote_wdir_, env, opts_.command));
  }
  std::vector<char*> argv;
  for (std::string& s : r->remote ? agent_words : opts_.command) argv.push_back(&s[0]);
  argv.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) {
    Message("fork for rank %d: %s", r->rank, std::strerror(errno));
    close_all();
    return false;
  }
  if (pid == 0) {
    ChildAfterFork(r, out_pipe[1], err_pipe[1], status_pipe[1], envp.data(), argv.data());
  }
  // Also set the group from the parent, so that it exists before we might signal it.
  setpgid(pid, pid);  // EACCES (child already exec'd) or ESRCH are fine: the child did it.
  r->pid = pid;
  r->running = true;
  close(status_pipe[1]);
  status_pipe[1] = -1;
  if (opts_.tag_output) {
    close(out_pipe[1]);
    close(err_pipe[1]);
    out_pipe[1] = err_pipe[1] = -1;
    r->out_fd = out_pipe[0];
    r->err_fd = err_pipe[0];
    out_pipe[0] = err_pipe[0] = -1;
    fcntl(r->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(r->err_fd, F_SETFL, O_NONBLOCK);
    const std::string prefix =
        opts_.MultiHost() ? "[" + std::to_string(r->rank) + "," + opts_.hosts[r->host].name + "] "
                          : "[" + std::to_string(r->rank) + "] ";
    r->out_tagger = std::make_unique<LineTagger>(&out_sink_, prefix);
    r->err_tagger = std::make_unique<LineTagger>(&err_sink_, prefix);
  }

  // EOF on the status pipe means exec succeeded; a record means it did not.
  ChildFailure f{};
  ssize_t n;
  do {
    n = read(status_pipe[0], &f, sizeof f);
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  status_pipe[0] = -1;
  if (n == static_cast<ssize_t>(sizeof f)) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    r->running = false;
    if (opts_.tag_output) {
      CloseOutput(r, false);
      CloseOutput(r, true);
    }
    switch (f.stage) {
      case kStageChdir:
        Message("%s: cannot change to directory '%s': %s", Who(*r).c_str(), opts_.wdir.c_str(),
                std::strerror(f.err));
        exit_code_ = 1;
        break;
      case kStageExec:
        if (r->remote) {
          Message("%s: cannot execute the launch agent '%s': %s", Who(*r).c_str(),
                  opts_.launch_agent[0].c_str(), std::strerror(f.err));
        } else {
          Message("%s: cannot execute '%s': %s", Who(*r).c_str(), opts_.command[0].c_str(),
                  std::strerror(f.err));
        }
        exit_code_ = f.err == ENOENT ? 127 : 126;
        break;
      default:
        Message("%s: cannot set up standard streams: %s", Who(*r).c_str(), std::strerror(f.err));
        exit_code_ = 1;
        break;
    }
    exit_code_set_ = true;
    return false;
  }
  return true;
}

void Launcher::KillGroup(const Rank& r, int sig) {
  // Only called while the leader is unreaped (alive or a zombie), so the group
  // id still belongs to this job.
  if (r.pid > 0) kill(-r.pid, sig);
}

void Launcher::BeginTeardown() {
  if (tearing_down_) return;
  tearing_down_ = true;
  grace_deadline_ms_ = NowMs() + kGraceMs;
  for (const Rank& r : ranks_) {
    if (!r.running) continue;
    KillGroup(r, SIGTERM);
    KillGroup(r, SIGCONT);  // a stopped rank must wake up to die
  }
}

void Launcher::CloseOutput(Rank* r, bool is_err) {
  int& fd = is_err ? r->err_fd : r->out_fd;
  if (fd < 0) return;
  close(fd);
  fd = -1;
  LineTagger* t = is_err ? r->err_tagger.get() : r->out_tagger.get();
  if (t) t->Finish();
}

// Reads what is available on one output pipe (up to `limit` bytes); closes it at EOF.
void Launcher::DrainFd(Rank* r, bool is_err, size_t limit) {
  int fd = is_err ? r->err_fd : r->out_fd;
  if (fd < 0) return;
  LineTagger* t = is_err ? r->err_tagger.get() : r->out_tagger.get();
  char buf[kReadChunk];
  size_t total = 0;
  while (total < limit) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      t->Feed(buf, static_cast<size_t>(n));
      total += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    CloseOutput(r, is_err);  // EOF, or an error that makes the pipe useless
    return;
  }
}

void Launcher::HandleSignals() {
  signalfd_siginfo si;
  for (;;) {
    ssize_t n = read(sigfd_, &si, sizeof si);
    if (n != static_cast<ssize_t>(sizeof si)) return;  // EAGAIN: nothing more pending
    int sig = static_cast<int>(si.ssi_signo);
    if (sig == SIGCHLD) {
      // SIGCHLD is not queued: one notification may stand for several exits,
      // so CheckChildren() looks at every rank. It runs after this read, so no
      // exit can slip between the two.
      continue;
    }
    if (user_signal_ == 0) {
      user_signal_ = sig;
      if (!exit_code_set_) {
        exit_code_ = 128 + sig;
        exit_code_set_ = true;
      }
      Message("received %s; terminating %d rank%s", SignalName(sig), RunningCount(),
              RunningCount() == 1 ? "" : "s");
      BeginTeardown();
    } else if (!sigkill_sent_) {
      // A second interrupt: do not wait out the grace period.
      Message("received %s again; killing all ranks", SignalName(sig));
      BeginTeardown();
      for (const Rank& r : ranks_) {
        if (r.running) KillGroup(r, SIGKILL);
      }
      sigkill_sent_ = true;
    }
  }
}

void Launcher::CheckChildren() {
  // Phase 1: see which leaders have exited, without reaping them yet.
  struct Exit {
    Rank* rank;
    siginfo_t info;
  };
  std::vector<Exit> exits;
  for (Rank& r : ranks_) {
    if (!r.running) continue;
    siginfo_t info;
    std::memset(&info, 0, sizeof info);
    if (waitid(P_PID, static_cast<id_t>(r.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == r.pid) {
      exits.push_back({&r, info});
    }
  }
  if (exits.empty()) return;

  // Phase 2: exits seen before any teardown began are the job's own outcome;
  // later ones are ranks we are killing and say nothing about the job.
  const bool primary = !tearing_down_;
  bool failed = false;
  int first_signal = 0;
  int max_status = 0;
  // Jobs with hosts say where the rank ran, and the first failure line says
  // what happens next: "rank 3 on h1 exited with status 1; stopping the other 3 ranks".
  const int others = RunningCount() - static_cast<int>(exits.size());
  bool stop_noted = false;
  for (Exit& e : exits) {
    Rank* r = e.rank;
    // Print what the rank wrote before it died ahead of our note about it.
    if (opts_.tag_output) {
      DrainFd(r, false, kFinalDrainLimit);
      DrainFd(r, true, kFinalDrainLimit);
    }
    if (!primary) continue;
    if (opts_.HostMode()) {
      std::string what;
      if (e.info.si_code == CLD_EXITED) {
        if (e.info.si_status == 0) continue;
        what = "exited with status " + std::to_string(e.info.si_status);
        max_status = std::max(max_status, e.info.si_status);
      } else {
        int sig = e.info.si_status;
        what = "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")" +
               (e.info.si_code == CLD_DUMPED ? " (core dumped)" : "");
        if (first_signal == 0) first_signal = sig;
      }
      failed = true;
      std::string tail;
      if (!stop_noted && others > 0) {
        tail = "; stopping the other " + std::to_string(others) + " rank" + (others == 1 ? "" : "s");
      }
      stop_noted = true;
      Message("%s %s%s", Who(*r).c_str(), what.c_str(), tail.c_str());
      continue;
    }
    if (e.info.si_code == CLD_EXITED) {
      if (e.info.si_status != 0) {
        Message("rank %d (pid %d) exited with status %d", r->rank, static_cast<int>(r->pid),
                e.info.si_status);
        failed = true;
        max_status = std::max(max_status, e.info.si_status);
      }
    } else {  // CLD_KILLED or CLD_DUMPED
      int sig = e.info.si_status;
      Message("rank %d (pid %d) killed by signal %d (%s)%s", r->rank, static_cast<int>(r->pid), sig,
              strsignal(sig), e.info.si_code == CLD_DUMPED ? " (core dumped)" : "");
      failed = true;
      if (first_signal == 0) first_signal = sig;
    }
  }
  if (failed) {
    if (!exit_code_set_) {
      exit_code_ = first_signal != 0 ? 128 + first_signal : max_status;
      exit_code_set_ = true;
    }
    if (others > 0 && !opts_.HostMode()) {
      Message("terminating the other %d rank%s", others, others == 1 ? "" : "s");
    }
    BeginTeardown();
  }

  // Phase 3: during a teardown, whatever is left of a dead rank's process group
  // is killed while the zombie leader still pins the group id; then reap.
  for (Exit& e : exits) {
    Rank* r = e.rank;
    if (tearing_down_) KillGroup(*r, SIGKILL);
    int st = 0;
    while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR) {
    }
    r->running = false;
  }
}

void Launcher::EventLoop() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Rank*, bool>> owners;  // fds[i+1] -> (rank, is_err)
  while (RunningCount() > 0) {
    const int64_t now = NowMs();
    if (job_deadline_ms_ > 0 && !tearing_down_ && now >= job_deadline_ms_) {
      Message("job exceeded --timeout of %g s; terminating %d rank%s", opts_.timeout_s,
              RunningCount(), RunningCount() == 1 ? "" : "s");
      if (!exit_code_set_) {
        exit_code_ = 124;
        exit_code_set_ = true;
      }
      BeginTeardown();
    }
    if (tearing_down_ && !sigkill_sent_ && now >= grace_deadline_ms_) {
      for (const Rank& r : ranks_) {
        if (!r.running) continue;
        Message("%s (pid %d) still running %" PRId64 " ms after SIGTERM; sending SIGKILL",
                Who(r).c_str(), static_cast<int>(r.pid), kGraceMs);
        KillGroup(r, SIGKILL);
      }
      sigkill_sent_ = true;
    }

    int64_t deadline = -1;
    if (job_deadline_ms_ > 0 && !tearing_down_) deadline = job_deadline_ms_;
    if (tearing_down_ && !sigkill_sent_) deadline = grace_deadline_ms_;
    int timeout = -1;
    if (deadline >= 0) timeout = static_cast<int>(std::max<int64_t>(0, deadline - now));

    fds.clear();
    owners.clear();
    fds.push_back({sigfd_, POLLIN, 0});
    for (Rank& r : ranks_) {
      if (r.out_fd >= 0) {
        fds.push_back({r.out_fd, POLLIN, 0});
        owners.emplace_back(&r, false);
      }
      if (r.err_fd >= 0) {
        fds.push_back({r.err_fd, POLLIN, 0});
        owners.emplace_back(&r, true);
      }
    }
    int n = poll(fds.data(), fds.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      Message("poll: %s", std::strerror(errno));
      // Cannot wait properly any more: kill everything and reap blocking.
      BeginTeardown();
      for (Rank& r : ranks_) {
        if (!r.running) continue;
        KillGroup(r, SIGKILL);
        int st = 0;
        while (waitpid(r.pid, &st, 0) < 0 && errno == EINTR) {
        }
        r.running = false;
      }
      if (!exit_code_set_) {
        exit_code_ = 1;
        exit_code_set_ = true;
      }
      return;
    }
    // Output first (one chunk per ready pipe per round keeps ranks fair).
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) DrainFd(owners[i - 1].first, owners[i - 1].second, kReadChunk);
    }
    if (fds[0].revents != 0) {
      HandleSignals();
      CheckChildren();
    }
  }
}

// Every rank has exited: take what is already in the pipes and end the
// partial lines. Leftover grandchildren may hold the pipes open; we do not
// wait for them.
void Launcher::FinalDrain() {
  for (Rank& r : ranks_) {
    DrainFd(&r, false, kFinalDrainLimit);
    DrainFd(&r, true, kFinalDrainLimit);
    CloseOutput(&r, false);
    CloseOutput(&r, true);
  }
}

int Launcher::Run() {
  if (!Setup()) return 1;
  for (Rank& r : ranks_) {
    // Stop starting ranks once the job is already failing (a signal arrived,
    // an early rank died, or this one could not start).
    if (!StartRank(&r)) {
      if (!exit_code_set_) {
        exit_code_ = 1;
        exit_code_set_ = true;
      }
      BeginTeardown();
      break;
    }
    // Notice signals and early deaths between forks without blocking.
    pollfd p{sigfd_, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) {
      HandleSignals();
      CheckChildren();
      if (tearing_down_) break;
    }
  }
  EventLoop();
  FinalDrain();
  return exit_code_;
}

}  // namespace
}  // namespace chorusrun

int main(int argc, char** argv) {
  using namespace chorusrun;
  EnsureStdFds();
  Options opts;
  ParseResult pr = ParseOptions(argc, argv, &opts);
  switch (pr.status) {
    case ParseStatus::kHelp:
      std::fputs(UsageText().c_str(), stdout);
      return std::fflush(stdout) == 0 ? 0 : 1;
    case ParseStatus::kVersion:
      std::printf("chorusrun (Chorus) %s\n", CHORUSRUN_VERSION);
      return std::fflush(stdout) == 0 ? 0 : 1;
    case ParseStatus::kUsageError:
      std::fprintf(stderr, "chorusrun: %s\nTry 'chorusrun --help' for more information.\n",
                   pr.error.c_str());
      return 2;
    case ParseStatus::kRun:
      break;
  }
  for (const std::string& w : opts.warnings) Message("warning: %s", w.c_str());
  Launcher launcher(std::move(opts));
  int rc = launcher.Run();
  // The bootstrap root (jobs with hosts) is a detached thread that may still be
  // waiting: leave without running static destructors under its feet.
  std::fflush(nullptr);
  std::_Exit(rc);
}
