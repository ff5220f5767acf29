// options.h — the command line of chorus-train.
#pragma once

#include <cstdint>
#include <string>

namespace trainer {

struct Options {
  std::string model = "cnn";  // cnn | mlp
  int64_t epochs = 3;
  int64_t batch = 64;  // per rank, per micro-batch (as in DDP)
  int64_t accum = 1;   // micro-batches per optimizer step (no_sync for the others)
  double lr = 0.05;
  double momentum = 0.9;
  double weightDecay = 0.0;
  double bucketMb = 25.0;      // gradient bucket cap
  double firstBucketMb = 1.0;  // cap of the first bucket (starts communication early)
  bool syncBn = false;         // batch norm statistics over all ranks
  bool overlap = true;         // launch bucket all-reduces during backward
  int64_t width = 32;          // CNN: channels of the first convolution (second: 2x)
  bool useDouble = false;      // float64 model and data (equivalence checks)
  uint64_t seed = 1;
  int threads = 1;         // libtorch intra-op threads per rank
  std::string dataDir;     // default: kDefaultDataDir
  int64_t trainLimit = 0;  // use only the first N training samples (0: all)
  int64_t testLimit = 0;   // evaluate on the first N test samples (0: all)
  int64_t maxSteps = 0;    // stop after N optimizer steps in total (0: no limit)
  bool eval = true;
  std::string checkpoint;   // save at the end of every epoch (rank 0 writes)
  std::string resume;       // load this checkpoint and continue after its epoch
  std::string dumpParams;   // final parameters and counters as text ("%r": per rank)
  std::string trace;        // Chrome trace JSON ("%r": per rank; else rank 0 only)
  int64_t traceSteps = 20;  // optimizer steps recorded in the trace
  bool progress = true;
  bool elastic = false;  // keep training on the survivors when a rank dies (elastic.h)
  // Model and pipeline parallelism (docs/TRAINER.md, "Pipeline, tensor and hybrid
  // parallel"). world = data-parallel replicas x pipelineStages x tensorParallel.
  int pipelineStages = 1;
  int64_t microBatches = 1;       // per optimizer step (and per --accum round); divides --batch
  std::string schedule = "1f1b";  // gpipe | 1f1b
  int tensorParallel = 1;
  std::string split = "params";  // stage split balances: params | time (measured)
  // Parameter-server training (docs/TRAINER.md, "Parameter server"; trainer/ps_train.h).
  bool ps = false;                  // --ps-servers or --ps-colocated given
  int psServers = 0;                // the first K ranks serve, the others work
  bool psColocated = false;         // every rank works and serves one shard
  std::string psMode = "sync";      // sync | async | ssp
  int64_t staleness = 0;            // ssp: steps a worker may run ahead of the slowest
  std::string psOptimizer = "sgd";  // sgd (with --momentum) | adam (on the servers)
  int64_t hashBuckets = 131072;     // --model hashed: rows of the embedding table
  int psTestDropPushFrom = -1;      // test only: servers ignore this rank's pushes (sync)
};

/// Parses argv. Throws std::invalid_argument with a message naming the bad flag.
/// Returns false (after printing usage to stdout) for --help.
bool parseOptions(int argc, char** argv, Options* out);

/// `pattern` with "%r" replaced by the rank; "" when there is no "%r" and rank != 0.
std::string perRankPath(const std::string& pattern, int rank);

}  // namespace trainer
