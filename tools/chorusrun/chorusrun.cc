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
#include "tools/chorusrun/binding.h"
#include "tools/chorusrun/bound_exec.h"
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

int64_t nowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// chorusrun's own diagnostics: one write per line so they never land inside
// another line on a shared stderr.
void message(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void message(const char* fmt, ...) {
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
  writeAll(&err, line.data(), line.size());
}

const char* signalName(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal";
  }
}

// Make sure descriptors 0, 1 and 2 are open, so that pipes and sockets created
// below can never be mistaken for the standard streams.
void ensureStdFds() {
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
bool pickFreePort(int* port) {
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

std::string envName(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// The parts of the environment shared by all ranks: the launcher's own
// environment, minus every variable chorusrun sets, plus those settings.
// CHORUS_INIT_SERVED is never inherited (a chorusrun started from inside a
// rank must not pass its parent's on): it is there only when set here or by -x.
std::vector<std::string> baseEnvironment(const std::vector<EnvSetting>& settings) {
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
  int cpuSlot = -1;      // index into Launcher::binding_ (-1: runs unbound)
  pid_t pid = -1;        // also the process group id
  bool running = false;  // started and not yet reaped
  int outFd = -1;        // --tag-output: read ends of the rank's stdout/stderr pipes
  int errFd = -1;
  std::unique_ptr<LineTagger> outTagger;
  std::unique_ptr<LineTagger> errTagger;
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
  int run();

 private:
  bool setup();
  bool startRank(Rank* r);
  bool startRoot(std::vector<EnvSetting>* settings);
  [[noreturn]] void childAfterFork(Rank* r, int outW, int errW, int statusW, char** envp,
                                   char** argv);
  std::string who(const Rank& r) const;            // "rank 3 on host" (host jobs) / "rank 3"
  RemoteBinder remoteBinder(const Rank& r) const;  // --bind-to for a remote rank
  void eventLoop();
  void handleSignals();
  void checkChildren();
  void noteKeepGoing(const Rank& r, const siginfo_t& info);
  void drainFd(Rank* r, bool isErr, size_t limit);
  void closeOutput(Rank* r, bool isErr);
  void beginTeardown();
  void killGroup(const Rank& r, int sig);
  void finalDrain();
  int runningCount() const;

  Options opts_;
  std::vector<Rank> ranks_;
  std::vector<std::vector<std::string>> rankEnv_;  // per rank, owned strings
  std::vector<cpu_set_t> binding_;                 // --bind-to: one set per rank of this machine
  std::vector<std::string> baseEnv_;
  // Remote ranks: the "NAME=VALUE" words of their `env` command (without the
  // per-rank variables), the remote working directory, and the host names.
  std::vector<std::string> remoteEnv_;
  std::string remoteWdir_;
  std::string selfExe_;  // chorusrun's path, which binds remote ranks (bound_exec.h)
  Sink outSink_{STDOUT_FILENO, false};
  Sink errSink_{STDERR_FILENO, false};

  sigset_t origMask_{};
  int sigfd_ = -1;
  int devnullFd_ = -1;
  bool stdinToRank0_ = false;

  bool tearingDown_ = false;
  bool sigkillSent_ = false;
  int64_t graceDeadlineMs_ = 0;
  int64_t jobDeadlineMs_ = 0;  // 0: no --timeout
  int userSignal_ = 0;         // first SIGINT/SIGTERM/SIGHUP received
  int exitCode_ = 0;
  bool exitCodeSet_ = false;  // the job's status is decided (first failure, signal, timeout)
  // --keep-going: the first failure's status, ranks that exited 0, and whether any rank
  // exited non-zero on its own (a failure no survivor can have handled).
  int keepGoingFirst_ = 0;
  int keepGoingClean_ = 0;
  bool keepGoingUnhandled_ = false;
};

Launcher::~Launcher() {
  for (Rank& r : ranks_) {
    if (r.outFd >= 0) close(r.outFd);
    if (r.errFd >= 0) close(r.errFd);
  }
  if (sigfd_ >= 0) close(sigfd_);
  if (devnullFd_ >= 0) close(devnullFd_);
}

int Launcher::runningCount() const {
  int n = 0;
  for (const Rank& r : ranks_) n += r.running ? 1 : 0;
  return n;
}

bool Launcher::setup() {
  // Writes to a closed stdout must fail with EPIPE, not kill the launcher while
  // ranks are running. Ranks get the default disposition back before exec.
  signal(SIGPIPE, SIG_IGN);

  // Signals come through a signalfd: block them, make sure none of them is
  // ignored (a blocked, ignored signal is discarded instead of queued), except
  // SIGHUP when the caller ignored it on purpose (nohup).
  struct sigaction oldHup {};
  sigaction(SIGHUP, nullptr, &oldHup);
  bool hupIgnored = oldHup.sa_handler == SIG_IGN;
  signal(SIGCHLD, SIG_DFL);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  if (!hupIgnored) sigaddset(&mask, SIGHUP);
  if (sigprocmask(SIG_BLOCK, &mask, &origMask_) != 0) {
    message("sigprocmask: %s", std::strerror(errno));
    return false;
  }
  sigfd_ = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigfd_ < 0) {
    message("signalfd: %s", std::strerror(errno));
    return false;
  }

  devnullFd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (devnullFd_ < 0) {
    message("cannot open /dev/null: %s", std::strerror(errno));
    return false;
  }
  // Ranks run in their own process groups, i.e. in the background of a
  // terminal: reading the terminal would stop them (SIGTTIN). Rank 0 gets
  // chorusrun's stdin only when it is not a terminal; everyone else reads
  // /dev/null.
  stdinToRank0_ = !isatty(STDIN_FILENO);

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
      message("cannot make the job secret (see the message above)");
      return false;
    }
    settings.push_back({"CHORUS_SECRET", secret});
  }
  if (!exported("CHORUS_INIT")) {
    if (opts_.hostMode()) {
      if (!startRoot(&settings)) return false;
    } else {
      int port = 0;
      if (!pickFreePort(&port)) {
        message("cannot find a free TCP port on 127.0.0.1: %s", std::strerror(errno));
        return false;
      }
      settings.push_back({"CHORUS_INIT", "tcp://127.0.0.1:" + std::to_string(port)});
    }
  }
  for (const EnvSetting& s : opts_.exports) settings.push_back(s);
  baseEnv_ = baseEnvironment(settings);

  if (opts_.anyRemote()) {
    // What a remote rank's `env` sets: every CHORUS_* variable a local rank
    // would inherit, and everything chorusrun or -x sets (-x VAR has already
    // captured VAR's current value). The rest of chorusrun's environment stays
    // here, as with ssh.
    for (const std::string& e : baseEnv_) {
      const std::string name = envName(e);
      bool setHere = name.rfind("CHORUS_", 0) == 0;
      for (const EnvSetting& st : settings) setHere = setHere || st.name == name;
      if (setHere) remoteEnv_.push_back(e);
    }
    std::string cwd;
    if (opts_.wdir.empty() || opts_.wdir[0] != '/') {
      std::vector<char> buf(4096);
      while (getcwd(buf.data(), buf.size()) == nullptr) {
        if (errno != ERANGE || buf.size() > (1u << 20)) {
          message("cannot determine the working directory for remote ranks: %s (use --wdir)",
                  std::strerror(errno));
          return false;
        }
        buf.resize(buf.size() * 2);
      }
      cwd = buf.data();
    }
    if (opts_.wdir.empty()) {
      remoteWdir_ = cwd;
    } else if (opts_.wdir[0] == '/') {
      remoteWdir_ = opts_.wdir;
    } else {
      remoteWdir_ = cwd + "/" + opts_.wdir;
    }
  }

  ranks_.resize(static_cast<size_t>(opts_.np));
  rankEnv_.resize(static_cast<size_t>(opts_.np));
  const std::string n = std::to_string(opts_.np);
  for (int i = 0; i < opts_.np; ++i) {
    Rank& rk = ranks_[i];
    rk.rank = i;
    const std::string r = std::to_string(i);
    if (opts_.hostMode()) {
      const Placement& pl = opts_.placements[i];
      rk.host = pl.host;
      rk.remote = !opts_.hosts[pl.host].local;
      rankEnv_[i] = {"CHORUS_RANK=" + r, "CHORUS_WORLD_SIZE=" + n,
                     "CHORUS_LOCAL_RANK=" + std::to_string(pl.localRank),
                     "CHORUS_LOCAL_SIZE=" + std::to_string(opts_.localSizes[pl.host]),
                     "CHORUS_NODE_RANK=" + std::to_string(pl.host)};
    } else {
      rankEnv_[i] = {"CHORUS_RANK=" + r, "CHORUS_WORLD_SIZE=" + n, "CHORUS_LOCAL_RANK=" + r,
                     "CHORUS_LOCAL_SIZE=" + n, "CHORUS_NODE_RANK=0"};
    }
  }
  // --bind-to: the ranks that run on this machine, each on a core of its own (binding.h).
  int onThisMachine = 0;
  for (Rank& rk : ranks_) onThisMachine += rk.remote ? 0 : 1;
  std::string bindNote;
  binding_ = planBinding(onThisMachine, opts_.bindTo, &bindNote);
  if (!bindNote.empty()) message("--bind-to core: %s", bindNote.c_str());
  if (!binding_.empty()) {
    int slot = 0;
    for (Rank& rk : ranks_)
      if (!rk.remote) rk.cpuSlot = slot++;
  }
  // The other hosts' ranks bind themselves there, through chorusrun at the same path.
  if (opts_.anyRemote() && opts_.bindTo != BindMode::kNone) {
    selfExe_ = selfExecutable();
    if (selfExe_.empty())
      message(
          "cannot find chorusrun's own executable (/proc/self/exe): remote ranks run "
          "unbound");
  }
  if (opts_.timeoutSeconds > 0) {
    jobDeadlineMs_ = nowMs() + static_cast<int64_t>(std::ceil(opts_.timeoutSeconds * 1000.0));
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
bool Launcher::startRoot(std::vector<EnvSetting>* settings) {
  RendezvousAddr ra;
  std::string err;
  if (!opts_.rendezvousAddr.empty()) {
    if (!rendezvousFromText(opts_.rendezvousAddr, &ra, &err)) {
      message("%s", err.c_str());
      return false;
    }
  } else if (!opts_.anyRemote()) {
    ra.urlHost = "127.0.0.1";
    ra.bindHost = "127.0.0.1";
  } else {
    const HostSpec* first = nullptr;
    for (const HostSpec& h : opts_.hosts) {
      if (!h.local) {
        first = &h;
        break;
      }
    }
    if (!rendezvousByRoute(first->name, &ra, &err)) {
      message("%s", err.c_str());
      return false;
    }
  }
  std::string secretHex;
  for (const EnvSetting& st : *settings) {
    if (st.name == "CHORUS_SECRET") secretHex = st.value;
  }
  for (const EnvSetting& st : opts_.exports) {
    if (st.name == "CHORUS_SECRET") secretHex = st.value;  // -x wins, as in the environment
  }
  int port = 0;
  if (chorus::launcherServeRoot(ra.bindHost, secretHex, &port) != chorusSuccess) {
    message("cannot serve the bootstrap root on %s (see the message above)", ra.bindHost.c_str());
    return false;
  }
  settings->push_back({"CHORUS_INIT", "tcp://" + ra.urlHost + ":" + std::to_string(port)});
  settings->push_back({"CHORUS_INIT_SERVED", "1"});
  return true;
}

RemoteBinder Launcher::remoteBinder(const Rank& r) const {
  RemoteBinder b;
  const int localSize = opts_.localSizes[static_cast<size_t>(r.host)];
  if (selfExe_.empty() || !mayBind(opts_.bindTo, localSize)) return b;
  b.words = boundExecWords(selfExe_, opts_.bindTo,
                           opts_.placements[static_cast<size_t>(r.rank)].localRank, localSize);
  b.required = opts_.bindTo == BindMode::kCore;
  b.missing =
      "chorusrun: " + who(r) + ": no " + selfExe_ + " there to bind it with" +
      (b.required ? " (--bind-to core; --bind-to none starts ranks unbound)" : "; it runs unbound");
  return b;
}

std::string Launcher::who(const Rank& r) const {
  if (!opts_.hostMode()) return "rank " + std::to_string(r.rank);
  return "rank " + std::to_string(r.rank) + " on " + opts_.hosts[r.host].name;
}

void Launcher::childAfterFork(Rank* r, int outW, int errW, int statusW, char** envp, char** argv) {
  // Only async-signal-safe calls from here on (plus execvp).
  auto fail = [&](int stage) {
    ChildFailure f{stage, errno};
    ssize_t ignored = write(statusW, &f, sizeof f);
    (void)ignored;
    _exit(stage == kStageExec && f.err == ENOENT ? 127 : 126);
  };
  setpgid(0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  sigprocmask(SIG_SETMASK, &origMask_, nullptr);

  int inFd = (r->rank == 0 && stdinToRank0_) ? STDIN_FILENO : devnullFd_;
  if (inFd != STDIN_FILENO && dup2(inFd, STDIN_FILENO) < 0) fail(kStageStdin);
  // dup2 clears close-on-exec on the new descriptor; the pipe ends themselves
  // are close-on-exec and vanish at exec.
  if (outW >= 0 && dup2(outW, STDOUT_FILENO) < 0) fail(kStageStdin);
  if (errW >= 0 && dup2(errW, STDERR_FILENO) < 0) fail(kStageStdin);
  // Binding is advice: a rank that cannot be bound (a cpuset changed under us) runs unbound.
  if (r->cpuSlot >= 0)
    (void)sched_setaffinity(0, sizeof(cpu_set_t), &binding_[static_cast<size_t>(r->cpuSlot)]);
  // A launch agent runs in chorusrun's directory; the remote command does the cd.
  if (!r->remote && !opts_.wdir.empty() && chdir(opts_.wdir.c_str()) != 0) fail(kStageChdir);
  environ = envp;  // execvp searches the rank's own PATH
  execvp(argv[0], argv);
  fail(kStageExec);
  _exit(126);  // not reached
}

bool Launcher::startRank(Rank* r) {
  int outPipe[2] = {-1, -1};
  int errPipe[2] = {-1, -1};
  int statusPipe[2] = {-1, -1};
  auto closeAll = [&]() {
    for (int* p : {outPipe, errPipe, statusPipe}) {
      for (int k = 0; k < 2; ++k) {
        if (p[k] >= 0) close(p[k]);
        p[k] = -1;
      }
    }
  };
  if (pipe2(statusPipe, O_CLOEXEC) != 0 ||
      (opts_.tagOutput && (pipe2(outPipe, O_CLOEXEC) != 0 || pipe2(errPipe, O_CLOEXEC) != 0))) {
    message("cannot create pipes for rank %d: %s", r->rank, std::strerror(errno));
    closeAll();
    return false;
  }

  // Everything the child needs is built before fork.
  std::vector<char*> envp;
  envp.reserve(baseEnv_.size() + 5);
  for (std::string& s : baseEnv_) envp.push_back(&s[0]);
  if (!r->remote) {
    for (std::string& s : rankEnv_[r->rank]) envp.push_back(&s[0]);
  }
  envp.push_back(nullptr);
  std::vector<std::string> agentWords;
  if (r->remote) {
    // CMD... HOST 'cd WDIR || exit 1; exec env VAR=VALUE... PROGRAM ARGS...'
    std::vector<std::string> env = remoteEnv_;
    env.insert(env.end(), rankEnv_[r->rank].begin(), rankEnv_[r->rank].end());
    agentWords = opts_.launchAgent;
    agentWords.push_back(opts_.hosts[r->host].name);
    agentWords.push_back(remoteCommand(remoteWdir_, env, opts_.command, remoteBinder(*r)));
  }
  std::vector<char*> argv;
  for (std::string& s : r->remote ? agentWords : opts_.command) argv.push_back(&s[0]);
  argv.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) {
    message("fork for rank %d: %s", r->rank, std::strerror(errno));
    closeAll();
    return false;
  }
  if (pid == 0) {
    childAfterFork(r, outPipe[1], errPipe[1], statusPipe[1], envp.data(), argv.data());
  }
  // Also set the group from the parent, so that it exists before we might signal it.
  setpgid(pid, pid);  // EACCES (child already exec'd) or ESRCH are fine: the child did it.
  r->pid = pid;
  r->running = true;
  close(statusPipe[1]);
  statusPipe[1] = -1;
  if (opts_.tagOutput) {
    close(outPipe[1]);
    close(errPipe[1]);
    outPipe[1] = errPipe[1] = -1;
    r->outFd = outPipe[0];
    r->errFd = errPipe[0];
    outPipe[0] = errPipe[0] = -1;
    fcntl(r->outFd, F_SETFL, O_NONBLOCK);
    fcntl(r->errFd, F_SETFL, O_NONBLOCK);
    const std::string prefix =
        opts_.multiHost() ? "[" + std::to_string(r->rank) + "," + opts_.hosts[r->host].name + "] "
                          : "[" + std::to_string(r->rank) + "] ";
    r->outTagger = std::make_unique<LineTagger>(&outSink_, prefix);
    r->errTagger = std::make_unique<LineTagger>(&errSink_, prefix);
  }

  // EOF on the status pipe means exec succeeded; a record means it did not.
  ChildFailure f{};
  ssize_t n;
  do {
    n = read(statusPipe[0], &f, sizeof f);
  } while (n < 0 && errno == EINTR);
  close(statusPipe[0]);
  statusPipe[0] = -1;
  if (n == static_cast<ssize_t>(sizeof f)) {
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    r->running = false;
    if (opts_.tagOutput) {
      closeOutput(r, false);
      closeOutput(r, true);
    }
    switch (f.stage) {
      case kStageChdir:
        message("%s: cannot change to directory '%s': %s", who(*r).c_str(), opts_.wdir.c_str(),
                std::strerror(f.err));
        exitCode_ = 1;
        break;
      case kStageExec:
        if (r->remote) {
          message("%s: cannot execute the launch agent '%s': %s", who(*r).c_str(),
                  opts_.launchAgent[0].c_str(), std::strerror(f.err));
        } else {
          message("%s: cannot execute '%s': %s", who(*r).c_str(), opts_.command[0].c_str(),
                  std::strerror(f.err));
        }
        exitCode_ = f.err == ENOENT ? 127 : 126;
        break;
      default:
        message("%s: cannot set up standard streams: %s", who(*r).c_str(), std::strerror(f.err));
        exitCode_ = 1;
        break;
    }
    exitCodeSet_ = true;
    return false;
  }
  return true;
}

void Launcher::killGroup(const Rank& r, int sig) {
  // Only called while the leader is unreaped (alive or a zombie), so the group
  // id still belongs to this job.
  if (r.pid > 0) kill(-r.pid, sig);
}

void Launcher::beginTeardown() {
  if (tearingDown_) return;
  tearingDown_ = true;
  graceDeadlineMs_ = nowMs() + kGraceMs;
  for (const Rank& r : ranks_) {
    if (!r.running) continue;
    killGroup(r, SIGTERM);
    killGroup(r, SIGCONT);  // a stopped rank must wake up to die
  }
}

void Launcher::closeOutput(Rank* r, bool isErr) {
  int& fd = isErr ? r->errFd : r->outFd;
  if (fd < 0) return;
  close(fd);
  fd = -1;
  LineTagger* t = isErr ? r->errTagger.get() : r->outTagger.get();
  if (t) t->finish();
}

// Reads what is available on one output pipe (up to `limit` bytes); closes it at EOF.
void Launcher::drainFd(Rank* r, bool isErr, size_t limit) {
  int fd = isErr ? r->errFd : r->outFd;
  if (fd < 0) return;
  LineTagger* t = isErr ? r->errTagger.get() : r->outTagger.get();
  char buf[kReadChunk];
  size_t total = 0;
  while (total < limit) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      t->feed(buf, static_cast<size_t>(n));
      total += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    closeOutput(r, isErr);  // EOF, or an error that makes the pipe useless
    return;
  }
}

void Launcher::handleSignals() {
  signalfd_siginfo si;
  for (;;) {
    ssize_t n = read(sigfd_, &si, sizeof si);
    if (n != static_cast<ssize_t>(sizeof si)) return;  // EAGAIN: nothing more pending
    int sig = static_cast<int>(si.ssi_signo);
    if (sig == SIGCHLD) {
      // SIGCHLD is not queued: one notification may stand for several exits,
      // so checkChildren() looks at every rank. It runs after this read, so no
      // exit can slip between the two.
      continue;
    }
    if (userSignal_ == 0) {
      userSignal_ = sig;
      if (!exitCodeSet_) {
        exitCode_ = 128 + sig;
        exitCodeSet_ = true;
      }
      message("received %s; terminating %d rank%s", signalName(sig), runningCount(),
              runningCount() == 1 ? "" : "s");
      beginTeardown();
    } else if (!sigkillSent_) {
      // A second interrupt: do not wait out the grace period.
      message("received %s again; killing all ranks", signalName(sig));
      beginTeardown();
      for (const Rank& r : ranks_) {
        if (r.running) killGroup(r, SIGKILL);
      }
      sigkillSent_ = true;
    }
  }
}

void Launcher::noteKeepGoing(const Rank& r, const siginfo_t& info) {
  const bool exited = info.si_code == CLD_EXITED;
  const int status = info.si_status;
  if (exited && status == 0) {
    ++keepGoingClean_;
    return;
  }
  const bool bySignal = !exited || (r.remote && status > 128);
  if (keepGoingFirst_ == 0) keepGoingFirst_ = exited ? status : 128 + status;
  if (!bySignal) keepGoingUnhandled_ = true;
}

void Launcher::checkChildren() {
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
  const bool primary = !tearingDown_;
  bool failed = false;
  int firstSignal = 0;
  int maxStatus = 0;
  // Jobs with hosts say where the rank ran, and the first failure line says
  // what happens next: "rank 3 on h1 exited with status 1; stopping the other 3 ranks".
  const int others = runningCount() - static_cast<int>(exits.size());
  bool stopNoted = false;
  for (Exit& e : exits) {
    Rank* r = e.rank;
    // Print what the rank wrote before it died ahead of our note about it.
    if (opts_.tagOutput) {
      drainFd(r, false, kFinalDrainLimit);
      drainFd(r, true, kFinalDrainLimit);
    }
    if (!primary) continue;
    if (opts_.keepGoing) noteKeepGoing(*r, e.info);
    if (opts_.hostMode()) {
      std::string what;
      if (e.info.si_code == CLD_EXITED) {
        if (e.info.si_status == 0) continue;
        what = "exited with status " + std::to_string(e.info.si_status);
        maxStatus = std::max(maxStatus, e.info.si_status);
      } else {
        int sig = e.info.si_status;
        what = "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")" +
               (e.info.si_code == CLD_DUMPED ? " (core dumped)" : "");
        if (firstSignal == 0) firstSignal = sig;
      }
      failed = true;
      std::string tail;
      if (!stopNoted && others > 0) {
        tail = (opts_.keepGoing ? "; --keep-going: the other " : "; stopping the other ") +
               std::to_string(others) + " rank" + (others == 1 ? "" : "s") +
               (opts_.keepGoing ? (others == 1 ? " goes on" : " go on") : "");
      }
      stopNoted = true;
      message("%s %s%s", who(*r).c_str(), what.c_str(), tail.c_str());
      continue;
    }
    if (e.info.si_code == CLD_EXITED) {
      if (e.info.si_status != 0) {
        message("rank %d (pid %d) exited with status %d", r->rank, static_cast<int>(r->pid),
                e.info.si_status);
        failed = true;
        maxStatus = std::max(maxStatus, e.info.si_status);
      }
    } else {  // CLD_KILLED or CLD_DUMPED
      int sig = e.info.si_status;
      message("rank %d (pid %d) killed by signal %d (%s)%s", r->rank, static_cast<int>(r->pid), sig,
              strsignal(sig), e.info.si_code == CLD_DUMPED ? " (core dumped)" : "");
      failed = true;
      if (firstSignal == 0) firstSignal = sig;
    }
  }
  if (failed && opts_.keepGoing) {
    if (others > 0 && !opts_.hostMode())
      message("--keep-going: the other %d rank%s", others, others == 1 ? " goes on" : "s go on");
  } else if (failed) {
    if (!exitCodeSet_) {
      exitCode_ = firstSignal != 0 ? 128 + firstSignal : maxStatus;
      exitCodeSet_ = true;
    }
    if (others > 0 && !opts_.hostMode()) {
      message("terminating the other %d rank%s", others, others == 1 ? "" : "s");
    }
    beginTeardown();
  }

  // Phase 3: during a teardown, whatever is left of a dead rank's process group
  // is killed while the zombie leader still pins the group id; then reap.
  for (Exit& e : exits) {
    Rank* r = e.rank;
    if (tearingDown_) killGroup(*r, SIGKILL);
    int st = 0;
    while (waitpid(r->pid, &st, 0) < 0 && errno == EINTR) {
    }
    r->running = false;
  }
}

void Launcher::eventLoop() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Rank*, bool>> owners;  // fds[i+1] -> (rank, isErr)
  while (runningCount() > 0) {
    const int64_t now = nowMs();
    if (jobDeadlineMs_ > 0 && !tearingDown_ && now >= jobDeadlineMs_) {
      message("job exceeded --timeout of %g s; terminating %d rank%s", opts_.timeoutSeconds,
              runningCount(), runningCount() == 1 ? "" : "s");
      if (!exitCodeSet_) {
        exitCode_ = 124;
        exitCodeSet_ = true;
      }
      beginTeardown();
    }
    if (tearingDown_ && !sigkillSent_ && now >= graceDeadlineMs_) {
      for (const Rank& r : ranks_) {
        if (!r.running) continue;
        message("%s (pid %d) still running %" PRId64 " ms after SIGTERM; sending SIGKILL",
                who(r).c_str(), static_cast<int>(r.pid), kGraceMs);
        killGroup(r, SIGKILL);
      }
      sigkillSent_ = true;
    }

    int64_t deadline = -1;
    if (jobDeadlineMs_ > 0 && !tearingDown_) deadline = jobDeadlineMs_;
    if (tearingDown_ && !sigkillSent_) deadline = graceDeadlineMs_;
    int timeout = -1;
    if (deadline >= 0) timeout = static_cast<int>(std::max<int64_t>(0, deadline - now));

    fds.clear();
    owners.clear();
    fds.push_back({sigfd_, POLLIN, 0});
    for (Rank& r : ranks_) {
      if (r.outFd >= 0) {
        fds.push_back({r.outFd, POLLIN, 0});
        owners.emplace_back(&r, false);
      }
      if (r.errFd >= 0) {
        fds.push_back({r.errFd, POLLIN, 0});
        owners.emplace_back(&r, true);
      }
    }
    int n = poll(fds.data(), fds.size(), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      message("poll: %s", std::strerror(errno));
      // Cannot wait properly any more: kill everything and reap blocking.
      beginTeardown();
      for (Rank& r : ranks_) {
        if (!r.running) continue;
        killGroup(r, SIGKILL);
        int st = 0;
        while (waitpid(r.pid, &st, 0) < 0 && errno == EINTR) {
        }
        r.running = false;
      }
      if (!exitCodeSet_) {
        exitCode_ = 1;
        exitCodeSet_ = true;
      }
      return;
    }
    // Output first (one chunk per ready pipe per round keeps ranks fair).
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) drainFd(owners[i - 1].first, owners[i - 1].second, kReadChunk);
    }
    if (fds[0].revents != 0) {
      handleSignals();
      checkChildren();
    }
  }
}

// Every rank has exited: take what is already in the pipes and end the
// partial lines. Leftover grandchildren may hold the pipes open; we do not
// wait for them.
void Launcher::finalDrain() {
  for (Rank& r : ranks_) {
    drainFd(&r, false, kFinalDrainLimit);
    drainFd(&r, true, kFinalDrainLimit);
    closeOutput(&r, false);
    closeOutput(&r, true);
  }
}

int Launcher::run() {
  if (!setup()) return 1;
  for (Rank& r : ranks_) {
    // Stop starting ranks once the job is already failing (a signal arrived,
    // an early rank died, or this one could not start).
    if (!startRank(&r)) {
      if (!exitCodeSet_) {
        exitCode_ = 1;
        exitCodeSet_ = true;
      }
      beginTeardown();
      break;
    }
    // Notice signals and early deaths between forks without blocking.
    pollfd p{sigfd_, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) {
      handleSignals();
      checkChildren();
      if (tearingDown_) break;
    }
  }
  eventLoop();
  finalDrain();
  if (opts_.keepGoing && !exitCodeSet_ && keepGoingFirst_ != 0) {
    // The rule of --keep-going (see --help): lost ranks are fine if the others finished.
    const bool handled = keepGoingClean_ > 0 && !keepGoingUnhandled_;
    message("--keep-going: %d rank%s exited 0; %s", keepGoingClean_,
            keepGoingClean_ == 1 ? "" : "s",
            handled ? "the lost ranks were handled, exit status 0"
                    : ("exit status " + std::to_string(keepGoingFirst_) + " (the first failure's)")
                          .c_str());
    return handled ? 0 : keepGoingFirst_;
  }
  return exitCode_;
}

}  // namespace
}  // namespace chorusrun

int main(int argc, char** argv) {
  using namespace chorusrun;
  ensureStdFds();
  // On a remote host, for a rank of a job started elsewhere: bind, then exec the rank.
  if (argc > 1 && std::strcmp(argv[1], kBoundExecFlag) == 0)
    return boundExecMain(argc - 2, argv + 2);
  Options opts;
  ParseResult pr = parseOptions(argc, argv, &opts);
  switch (pr.status) {
    case ParseStatus::kHelp:
      std::fputs(usageText().c_str(), stdout);
      return std::fflush(stdout) == 0 ? 0 : 1;
    case ParseStatus::kVersion:
      std::printf("chorusrun (Chorus) %s\n", CHORUSRUN_VERSION);
      return std::fflush(stdout) == 0 ? 0 : 1;
    case ParseStatus::kUsageError:
      std::fprintf(stderr, "chorusrun: %s\nTry 'chorusrun --help' for more information.\n",
                   pr.error.c_str());
      return 2;
    case ParseStatus::kRun: break;
  }
  for (const std::string& w : opts.warnings) message("warning: %s", w.c_str());
  Launcher launcher(std::move(opts));
  int rc = launcher.run();
  // The bootstrap root (jobs with hosts) is a detached thread that may still be
  // waiting: leave without running static destructors under its feet.
  std::fflush(nullptr);
  std::_Exit(rc);
}
