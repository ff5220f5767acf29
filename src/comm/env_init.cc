#include "src/comm/env_init.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/secret.h"
#include "src/comm/hostid.h"
#include "src/comm/hostlist.h"
#include "src/core/checks.h"
#include "src/core/debug.h"
#include "src/core/params.h"
#include "src/core/timeout.h"

namespace chorus {
namespace {

// Launcher variables are facts about this process, not tunables, so they are read here
// directly rather than through the parameter registry.
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

bool parseNonNeg(const char* s, int* out) {
  if (!s) return false;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0' || v < 0 || v > (1 << 24)) return false;
  *out = static_cast<int>(v);
  return true;
}

// The launchers, each with the variables that carry this process's rank and the job's size,
// in the order they are tried. chorusGetLaunchInfo and chorusCommInitFromEnv both read them
// here: programs and launchers take the list from this one place.
struct LauncherVars {
  const char* rank;
  const char* size;
  const char* name;
};
constexpr LauncherVars kLaunchers[] = {
    {"CHORUS_RANK", "CHORUS_WORLD_SIZE", "chorusrun"},
    {"RANK", "WORLD_SIZE", "torchrun"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"},
    {"PMI_RANK", "PMI_SIZE", "PMI"},
    {"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
};

// The first launcher whose rank or size variable is set; its rank and size must then be
// valid. `api` names the caller in messages.
chorusResult_t findRankAndSize(const char* api, const LauncherVars** found, int* rank,
                               int* nranks) {
  for (const auto& l : kLaunchers) {
    const char* r = env(l.rank);
    const char* s = env(l.size);
    if (!r && !s) continue;
    if (!parseNonNeg(r, rank) || !parseNonNeg(s, nranks) || *nranks < 1 || *rank >= *nranks)
      CHORUS_FAIL(chorusInvalidArgument, "%s: %s=%s %s=%s is not a valid rank/size", api, l.rank,
                  r ? r : "(unset)", l.size, s ? s : "(unset)");
    *found = &l;
    return chorusSuccess;
  }
  CHORUS_FAIL(chorusInvalidUsage,
              "%s: no rank/size in the environment (expected CHORUS_RANK/"
              "CHORUS_WORLD_SIZE from chorusrun, RANK/WORLD_SIZE, OMPI_COMM_WORLD_RANK/SIZE or "
              "SLURM_PROCID/SLURM_NTASKS)",
              api);
}

chorusResult_t secretFor(const std::string& where, int nranks, uint8_t secret[16]) {
  const std::string& given = paramString(Param::Secret);
  if (!given.empty()) {
    if (given.size() != 32)
      CHORUS_FAIL(chorusInvalidArgument,
                  "CHORUS_SECRET must be 32 hex digits (it has %zu characters)", given.size());
    if (!parseSecretHex(given, secret))
      CHORUS_FAIL(chorusInvalidArgument, "CHORUS_SECRET is not hexadecimal");
    return chorusSuccess;
  }
  // No secret given: derive one every rank can compute. This only keeps strangers from
  // joining by accident; set CHORUS_SECRET (chorusrun does) to keep them out on purpose.
  std::string seed = "chorus-rendezvous:" + where + ":" + std::to_string(nranks);
  uint64_t a = fnv1a(seed.data(), seed.size());
  uint64_t b = fnv1a(seed.data(), seed.size(), a);
  std::memcpy(secret, &a, 8);
  std::memcpy(secret + 8, &b, 8);
  return chorusSuccess;
}

chorusResult_t tcpRendezvous(const std::string& hostport, EnvRendezvous* rv) {
  std::string host;
  int portNum = 0;
  const char* why = "";
  if (!parseHostPort(hostport, &host, &portNum, &why))
    CHORUS_FAIL(chorusInvalidArgument, "rendezvous address '%s' %s", hostport.c_str(), why);
  uint8_t secret[16];
  CHORUS_CHECK(secretFor(hostport, rv->nranks, secret));
  // chorusrun serves the root itself (rank 0 may be on any host) and says so.
  if (rv->rank == 0 && paramInt(Param::InitServed) == 0)
    return bootstrapCreateRootAt(host.c_str(), portNum, secret, &rv->id);
  return bootstrapIdFor(host.c_str(), portNum, secret, &rv->id);
}

// Under srun nobody hands us an address, but every task knows the step's host list and
// ids: rank 0 (the first task, placed on the first host by Slurm's block distribution)
// serves the root on a port derived from the job and step, and the others dial the
// first host by name. Returns "" when this is not a Slurm step.
chorusResult_t slurmInit(const EnvRendezvous& rv, std::string* init) {
  if (rv.source != "Slurm") return chorusSuccess;
  const char* nodes = env("SLURM_STEP_NODELIST");
  if (!nodes) nodes = env("SLURM_JOB_NODELIST");
  const char* job = env("SLURM_JOB_ID");
  if (!nodes || !job) return chorusSuccess;
  std::vector<std::string> hosts;
  if (!expandHostList(nodes, &hosts))
    CHORUS_FAIL(chorusInvalidArgument, "cannot parse the Slurm host list SLURM_STEP_NODELIST='%s'",
                nodes);
  const char* stepText = env("SLURM_STEP_ID");
  const unsigned long jobId = std::strtoul(job, nullptr, 10);
  const unsigned long step = stepText ? std::strtoul(stepText, nullptr, 10) : 0;
  // Steps of one job get neighbouring ports; jobs spread over a 16K range.
  const int64_t port =
      paramInt(Param::SlurmPortBase) + static_cast<int64_t>((jobId * 64 + step) % 16384);
  if (port < 1 || port > 65535)
    CHORUS_FAIL(
        chorusInvalidArgument,
        "CHORUS_SLURM_PORT_BASE=%lld gives port %lld for job %lu step %lu: outside 1..65535",
        static_cast<long long>(paramInt(Param::SlurmPortBase)), static_cast<long long>(port), jobId,
        step);
  *init = "tcp://" + hosts.front() + ":" + std::to_string(port);
  return chorusSuccess;
}

chorusResult_t fileRendezvous(const std::string& path, EnvRendezvous* rv) {
  if (rv->rank == 0) {
    CHORUS_CHECK(bootstrapCreateRoot(&rv->id));
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f)
      CHORUS_FAIL(chorusSystemError, "cannot write rendezvous file %s: %s", tmp.c_str(),
                  strerror(errno));
    size_t w = std::fwrite(&rv->id, sizeof(rv->id), 1, f);
    std::fclose(f);
    if (w != 1 || std::rename(tmp.c_str(), path.c_str()) != 0)
      CHORUS_FAIL(chorusSystemError, "cannot publish rendezvous file %s: %s", path.c_str(),
                  strerror(errno));
    rv->fileToRemove = path;
    return chorusSuccess;
  }
  const int64_t deadline = monotonicNs() + effectiveTimeoutS() * 1000000000ll;
  for (;;) {
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      size_t r = std::fread(&rv->id, sizeof(rv->id), 1, f);
      std::fclose(f);
      if (r == 1) return chorusSuccess;
    }
    if (monotonicNs() > deadline)
      CHORUS_FAIL(chorusTimeout,
                  "rank %d: rendezvous file %s never appeared (is rank 0 running? ranks on other "
                  "hosts cannot see it: set CHORUS_INIT=tcp://host:port there)",
                  rv->rank, path.c_str());
    usleep(10000);
  }
}

}  // namespace

chorusResult_t launchFromEnv(const char** launcher, int* rank, int* nranks) {
  // A launcher started us when one of its rank variables is set. A size alone is not one
  // (salloc's shell has SLURM_NTASKS but no SLURM_PROCID): that process runs alone.
  bool anyRank = false;
  for (const auto& l : kLaunchers) anyRank = anyRank || env(l.rank) != nullptr;
  if (!anyRank) {
    *launcher = nullptr;
    *rank = 0;
    *nranks = 1;
    return chorusSuccess;
  }
  const LauncherVars* found = nullptr;
  CHORUS_CHECK(findRankAndSize("chorusGetLaunchInfo", &found, rank, nranks));
  *launcher = found->name;
  return chorusSuccess;
}

chorusResult_t rendezvousFromEnv(EnvRendezvous* rv) {
  const LauncherVars* found = nullptr;
  CHORUS_CHECK(findRankAndSize("chorusCommInitFromEnv", &found, &rv->rank, &rv->nranks));
  rv->source = found->name;
  std::string init = paramString(Param::Init);
  if (init.empty() && env("MASTER_ADDR") && env("MASTER_PORT"))
    init = std::string("tcp://") + env("MASTER_ADDR") + ":" + env("MASTER_PORT");
  if (init.empty()) CHORUS_CHECK(slurmInit(*rv, &init));
  if (init.empty()) {
    // One host, no address: meet in a file named after the launcher's job.
    const char* job = env("OMPI_MCA_ess_base_jobid");
    std::string key = job ? std::string("ompi-") + job : "";
    if (key.empty() && env("SLURM_JOB_ID"))
      key = std::string("slurm-") + env("SLURM_JOB_ID") + "." +
            (env("SLURM_STEP_ID") ? env("SLURM_STEP_ID") : "0");
    if (key.empty())
      CHORUS_FAIL(chorusInvalidUsage,
                  "chorusCommInitFromEnv: no rendezvous (%s gave rank %d of %d): set "
                  "CHORUS_INIT=tcp://host:port or file:///path, or MASTER_ADDR/MASTER_PORT",
                  rv->source.c_str(), rv->rank, rv->nranks);
    init = "file:///tmp/chorus-rendezvous-" + key;
  }
  CHORUS_INFO(kLogInit, "rank %d of %d (from %s), rendezvous %s", rv->rank, rv->nranks,
              rv->source.c_str(), init.c_str());
  if (init.rfind("tcp://", 0) == 0) return tcpRendezvous(init.substr(6), rv);
  if (init.rfind("file://", 0) == 0) return fileRendezvous(init.substr(7), rv);
  CHORUS_FAIL(chorusInvalidArgument, "CHORUS_INIT='%s' is neither tcp://host:port nor file:///path",
              init.c_str());
}

void rendezvousDone(const EnvRendezvous& rv) {
  if (!rv.fileToRemove.empty()) std::remove(rv.fileToRemove.c_str());
}

}  // namespace chorus
