#include "trainer/options.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "trainer/dataset.h"

namespace trainer {
namespace {

const char kUsage[] =
    "usage: chorus-train [options]   (run it under chorusrun -np N, mpirun or srun)\n"
    "  --model cnn|mlp        model (default cnn: 2 conv + batch norm; mlp: 784-256-128-10)\n"
    "  --epochs N             epochs (default 3)\n"
    "  --batch N              per-rank batch size (default 64; global batch = N x ranks x accum)\n"
    "  --accum K              gradient accumulation: K micro-batches per step, all-reduce\n"
    "                         only on the last (default 1)\n"
    "  --lr X --momentum X --weight-decay X   SGD (defaults 0.05, 0.9, 0)\n"
    "  --bucket-mb X          gradient bucket cap in MB (default 25)\n"
    "  --first-bucket-mb X    cap of the first bucket in MB (default 1)\n"
    "  --sync-bn              batch norm with mean/variance over all ranks\n"
    "  --no-overlap           all-reduce the buckets only after backward (for comparison)\n"
    "  --width N              CNN channels: N, then 2N (default 32)\n"
    "  --double               float64 model and data\n"
    "  --seed N               shared seed: initial weights and shuffling (default 1)\n"
    "  --threads N            libtorch intra-op threads per rank (default 1)\n"
    "  --data-dir DIR         Fashion-MNIST files (default /usr/share/datasets/fashion-mnist)\n"
    "  --train-limit N        train on the first N samples only\n"
    "  --test-limit N         evaluate on the first N test samples only\n"
    "  --max-steps N          stop after N optimizer steps\n"
    "  --no-eval              skip the per-epoch test evaluation\n"
    "  --checkpoint FILE      save a checkpoint at the end of every epoch (rank 0 writes)\n"
    "  --resume FILE          continue from a checkpoint\n"
    "  --dump-params FILE     write final parameters, buffers and counters as text\n"
    "  --trace FILE           write a Chrome trace of the first --trace-steps steps\n"
    "  --trace-steps N        steps to trace (default 20)\n"
    "  --no-progress          no progress bar\n"
    "  --elastic              when a rank dies, go on with the survivors (docs/TRAINER.md)\n"
    "  --pipeline-stages S    split the model's layers into S pipeline stages (default 1)\n"
    "  --micro-batches M      pipeline micro-batches per step; must divide --batch (default 1)\n"
    "  --schedule gpipe|1f1b  pipeline schedule (default 1f1b)\n"
    "  --split params|time    balance the stages by parameter count (default) or by forward +\n"
    "                         backward time measured on rank 0 at start\n"
    "  --tensor-parallel T    split the MLP's / CNN classifier's linear layers over T ranks\n"
    "                         (default 1); data-parallel replicas = ranks / (S x T), and with\n"
    "                         S or T > 1, --batch is per replica (split into M micro-batches)\n"
    "  --ps-servers K         parameter-server training: ranks 0..K-1 hold the parameter\n"
    "                         shards and their optimizer state, the other ranks compute\n"
    "  --ps-colocated         every rank computes and also serves one shard (sync only)\n"
    "  --ps-mode sync|async|ssp   sync: equal to data parallel; async: each push applied on\n"
    "                         arrival; ssp: a worker runs at most --staleness steps ahead\n"
    "  --staleness S          ssp bound (default 0)\n"
    "  --ps-optimizer sgd|adam    the servers' optimizer (default sgd with --momentum)\n"
    "  --model hashed         (parameter server only) pixels hashed into an embedding table of\n"
    "  --hash-buckets N       N rows (default 131072); workers push/pull only touched rows\n"
    "  FILE arguments may contain %r (replaced by the rank); without it only rank 0 writes.\n";

int64_t toInt(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != 0 || x < lo || x > hi)
    throw std::invalid_argument(flag + ": expected an integer in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "], got '" + v + "'");
  return x;
}

double toDouble(const std::string& flag, const std::string& v, double lo, double hi) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != 0 || !(x >= lo && x <= hi))
    throw std::invalid_argument(flag + ": expected a number in [" + std::to_string(lo) + ", " +
                                std::to_string(hi) + "], got '" + v + "'");
  return x;
}

}  // namespace

bool parseOptions(int argc, char** argv, Options* o) {
  o->dataDir = kDefaultDataDir;
  constexpr int64_t kBig = int64_t(1) << 40;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + ": missing value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return false;
    } else if (a == "--model") {
      o->model = value();
      if (o->model != "cnn" && o->model != "mlp" && o->model != "hashed")
        throw std::invalid_argument("--model: expected cnn, mlp or hashed, got '" + o->model + "'");
    } else if (a == "--epochs")
      o->epochs = toInt(a, value(), 1, 100000);
    else if (a == "--batch")
      o->batch = toInt(a, value(), 1, 1 << 20);
    else if (a == "--accum")
      o->accum = toInt(a, value(), 1, 1 << 20);
    else if (a == "--lr")
      o->lr = toDouble(a, value(), 0, 1e3);
    else if (a == "--momentum")
      o->momentum = toDouble(a, value(), 0, 1);
    else if (a == "--weight-decay")
      o->weightDecay = toDouble(a, value(), 0, 1);
    else if (a == "--bucket-mb")
      o->bucketMb = toDouble(a, value(), 1e-6, 1e6);
    else if (a == "--first-bucket-mb")
      o->firstBucketMb = toDouble(a, value(), 1e-6, 1e6);
    else if (a == "--sync-bn")
      o->syncBn = true;
    else if (a == "--no-overlap")
      o->overlap = false;
    else if (a == "--width")
      o->width = toInt(a, value(), 1, 4096);
    else if (a == "--double")
      o->useDouble = true;
    else if (a == "--seed")
      o->seed = uint64_t(toInt(a, value(), 0, kBig));
    else if (a == "--threads")
      o->threads = int(toInt(a, value(), 1, 1024));
    else if (a == "--data-dir")
      o->dataDir = value();
    else if (a == "--train-limit")
      o->trainLimit = toInt(a, value(), 1, kBig);
    else if (a == "--test-limit")
      o->testLimit = toInt(a, value(), 1, kBig);
    else if (a == "--max-steps")
      o->maxSteps = toInt(a, value(), 1, kBig);
    else if (a == "--no-eval")
      o->eval = false;
    else if (a == "--checkpoint")
      o->checkpoint = value();
    else if (a == "--resume")
      o->resume = value();
    else if (a == "--dump-params")
      o->dumpParams = value();
    else if (a == "--trace")
      o->trace = value();
    else if (a == "--trace-steps")
      o->traceSteps = toInt(a, value(), 1, kBig);
    else if (a == "--no-progress")
      o->progress = false;
    else if (a == "--elastic")
      o->elastic = true;
    // Model and pipeline parallelism.
    else if (a == "--pipeline-stages")
      o->pipelineStages = int(toInt(a, value(), 1, 1024));
    else if (a == "--micro-batches")
      o->microBatches = toInt(a, value(), 1, 1 << 20);
    else if (a == "--schedule") {
      o->schedule = value();
      if (o->schedule != "gpipe" && o->schedule != "1f1b")
        throw std::invalid_argument("--schedule: expected gpipe or 1f1b, got '" + o->schedule +
                                    "'");
    } else if (a == "--tensor-parallel")
      o->tensorParallel = int(toInt(a, value(), 1, 1024));
    else if (a == "--split") {
      o->split = value();
      if (o->split != "params" && o->split != "time")
        throw std::invalid_argument("--split: expected params or time, got '" + o->split + "'");
    } else if (a == "--ps-servers") {
      o->ps = true;
      std::string v = value();
      o->psServers = int(toInt(a, v, -kBig, kBig));
      if (o->psServers < 1)
        throw std::invalid_argument("--ps-servers " + v +
                                    ": need at least 1 server (the first K ranks serve)");
    } else if (a == "--ps-colocated") {
      o->ps = true;
      o->psColocated = true;
    } else if (a == "--ps-mode") {
      o->psMode = value();
      if (o->psMode != "sync" && o->psMode != "async" && o->psMode != "ssp")
        throw std::invalid_argument("--ps-mode: unknown mode '" + o->psMode +
                                    "' (expected sync, async or ssp)");
    } else if (a == "--staleness") {
      std::string v = value();
      o->staleness = toInt(a, v, -kBig, kBig);
      if (o->staleness < 0) throw std::invalid_argument("--staleness " + v + ": must be >= 0");
    } else if (a == "--ps-optimizer") {
      o->psOptimizer = value();
      if (o->psOptimizer != "sgd" && o->psOptimizer != "adam")
        throw std::invalid_argument("--ps-optimizer: expected sgd or adam, got '" + o->psOptimizer +
                                    "'");
    } else if (a == "--hash-buckets")
      o->hashBuckets = toInt(a, value(), 1, int64_t(1) << 30);
    else if (a == "--ps-test-drop-push-from")  // negative control of the tests only
      o->psTestDropPushFrom = int(toInt(a, value(), 0, 1 << 20));
    else
      throw std::invalid_argument("unknown option '" + a + "' (see --help)");
  }
  if (o->batch % o->microBatches != 0)
    throw std::invalid_argument("--micro-batches " + std::to_string(o->microBatches) +
                                " does not divide --batch " + std::to_string(o->batch));
  if (o->model == "hashed" && !o->ps)
    throw std::invalid_argument(
        "--model hashed is the parameter-server sparse model: give "
        "--ps-servers K");
  if (o->psColocated && o->psServers > 0)
    throw std::invalid_argument(
        "--ps-colocated and --ps-servers: give one (colocated: every "
        "rank serves)");
  if (o->psColocated && o->psMode != "sync")
    throw std::invalid_argument("--ps-colocated supports --ps-mode sync only");
  if (o->ps && (!o->checkpoint.empty() || !o->resume.empty() || !o->trace.empty()))
    throw std::invalid_argument(
        "parameter-server mode does not do --checkpoint, --resume or "
        "--trace yet");
  if (o->ps && (o->pipelineStages > 1 || o->tensorParallel > 1 || o->elastic || o->accum > 1))
    throw std::invalid_argument(
        "parameter-server mode takes no --pipeline-stages, "
        "--tensor-parallel, --elastic or --accum");
  return true;
}

std::string perRankPath(const std::string& pattern, int rank) {
  size_t at = pattern.find("%r");
  if (at == std::string::npos) return rank == 0 ? pattern : std::string();
  std::string p = pattern;
  p.replace(at, 2, std::to_string(rank));
  return p;
}

}  // namespace trainer
