#include "trainer/train.h"

#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>

#include "trainer/dataset.h"
#include "trainer/image_tensors.h"
#include "trainer/ddp.h"
#include "trainer/elastic.h"
#include "trainer/evaluate.h"
#include "trainer/layout.h"
#include "trainer/models.h"
#include "trainer/parallel.h"
#include "trainer/pipeline.h"
#include "trainer/progress.h"
#include "trainer/ps_train.h"
#include "trainer/sampler.h"
#include "trainer/state_io.h"
#include "trainer/torch_chorus.h"
#include "trainer/trace.h"

namespace trainer {
namespace {

// Loss sum, correct predictions and samples of this rank's micro-batches in one epoch.
struct EpochTally {
  double lossSum = 0, correct = 0, samples = 0;
};

// Peak resident memory of this process in KiB (VmHWM), and a reset of that peak to the
// current size (Linux: "5" into /proc/self/clear_refs), so that the peak of the training
// loop alone can be read (1F1B against GPipe activation memory, docs/TRAINER.md). -1 when
// not available.
int64_t statusKb(const char* field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  const std::string format = std::string(field) + ": %lld kB";
  long long kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, format.c_str(), &kb) == 1) break;
  std::fclose(f);
  return kb;
}
int64_t peakRssKb() { return statusKb("VmHWM"); }

void resetPeakRss() {
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

}  // namespace

void train(const Options& opts, Comm& comm) {
  if (opts.ps) return trainPs(opts, comm);      // parameter-server training (ps_train.h)
  int rank = comm.rank(), world = comm.size();  // --elastic: both change when ranks die
  bool talk = rank == 0;                        // logging from rank 0 only
  const torch::ScalarType dtype = opts.useDouble ? torch::kDouble : torch::kFloat;
  // Checked on every rank before any communication: a bad layout fails everywhere at once.
  Layout layout = makeLayout(world, rank, opts.pipelineStages, opts.tensorParallel);
  if (opts.elastic && !layout.pureDataParallel())
    throw std::invalid_argument(
        "--elastic needs a pure data-parallel layout (no --pipeline-stages or --tensor-parallel "
        "above 1): a lost stage or shard cannot be replaced from the survivors");

  Split trainSet =
      toTensors(loadFashionMnist(opts.dataDir, "train", opts.trainLimit), opts.trainLimit, dtype);
  Split testSet;
  if (opts.eval)
    testSet =
        toTensors(loadFashionMnist(opts.dataDir, "t10k", opts.testLimit), opts.testLimit, dtype);

  // The groups of the hybrid layout (layout.h), split from the world in the same order on
  // every rank. Plain data parallel uses the world itself.
  std::unique_ptr<Comm> dpOwned, ppOwned, tpOwned;
  Comm* dp = &comm;
  Comm* pp = nullptr;
  Comm* tp = nullptr;
  if (!layout.pureDataParallel()) {
    dpOwned.reset(new Comm(comm, layout.stage * layout.tp + layout.tpRank, layout.dpRank, "dp"));
    ppOwned.reset(new Comm(comm, layout.dpRank * layout.tp + layout.tpRank, layout.stage, "pp"));
    tpOwned.reset(new Comm(comm, layout.dpRank * layout.pp + layout.stage, layout.tpRank, "tp"));
    dp = dpOwned.get();
    pp = ppOwned.get();
    tp = tpOwned.get();
  }

  // Time blocked on communication, over all of this rank's communicators.
  auto waitedSeconds = [&]() {
    double t = comm.waitSeconds();
    for (Comm* c : {dp, pp, tp})
      if (c && c != &comm) t += c->waitSeconds();
    return t;
  };

  // Same initial weights everywhere (the whole model from the seed, then this rank's part;
  // DP replica 0's are broadcast anyway).
  StageModel stage = buildStage(opts, layout, &comm, dp, layout.tp > 1 ? tp : nullptr, dtype);
  torch::nn::Sequential model = stage.local;
  TraceWriter trace(!perRankPath(opts.trace, rank).empty(), rank);
  if (!layout.pureDataParallel())
    trace.setLabel("rank " + std::to_string(rank) + " (stage " + std::to_string(layout.stage) +
                   ", tp " + std::to_string(layout.tpRank) + ", dp " +
                   std::to_string(layout.dpRank) + ")");
  const double mb = 1024.0 * 1024.0;
  DistributedDataParallel ddp(*model, *dp, trace, size_t(opts.bucketMb * mb),
                              size_t(opts.firstBucketMb * mb));
  ddp.setOverlap(opts.overlap);
  ddp.broadcastState();
  PipelineStage pipeline(model, layout, pp, stage.inShape, stage.outShape, stage.logitsShape, dtype,
                         ddp, trace, opts.schedule == "gpipe");
  // From here on, randomness that must differ between ranks (dropout, augmentation) does.
  torch::manual_seed(opts.seed + 1000003ull * uint64_t(rank + 1));

  torch::optim::SGD optimizer(
      model->parameters(),
      torch::optim::SGDOptions(opts.lr).momentum(opts.momentum).weight_decay(opts.weightDecay));
  Progress progress;
  if (!opts.resume.empty()) {
    progress = loadCheckpoint(opts.resume, *model, optimizer, comm, layout);
    ddp.broadcastState();
    if (talk)
      std::printf("resumed from %s after epoch %lld (%lld steps)\n", opts.resume.c_str(),
                  (long long)progress.epochsDone, (long long)progress.steps);
  }
  const bool bufferSync = !opts.syncBn;  // sync-BN buffers are equal by construction

  const int64_t n = trainSet.images.size(0);
  DistributedSampler sampler(n, layout.dpRank, layout.dp, /*shuffle=*/true, opts.seed);
  const int64_t microPerEpoch = sampler.samplesPerRank() / opts.batch;
  int64_t stepsPerEpoch = microPerEpoch / opts.accum;
  if (stepsPerEpoch == 0)
    throw std::invalid_argument("--batch x --accum (" + std::to_string(opts.batch * opts.accum) +
                                ") exceeds the " + std::to_string(sampler.samplesPerRank()) +
                                " samples of each replica");
  const int64_t micro = opts.microBatches;
  const bool countsSamples = layout.lastStage() && layout.tpRank == 0;
  if (talk) {
    std::printf(
        "chorus-train: model %s, %d rank(s) (%s), batch %lld per replica x %d replica(s) x "
        "accum %lld = %lld per step, %lld steps/epoch, %zu gradient bucket(s), "
        "sync-bn %s, %d torch thread(s) per rank, %s\n",
        opts.model.c_str(), world, comm.how(), (long long)opts.batch, layout.dp,
        (long long)opts.accum, (long long)(opts.batch * layout.dp * opts.accum),
        (long long)stepsPerEpoch, ddp.numBuckets(), opts.syncBn ? "on" : "off", opts.threads,
        opts.useDouble ? "float64" : "float32");
    if (!layout.pureDataParallel() || micro > 1)
      std::printf("layout: %s (%zu layers), %lld micro-batch(es) of %lld, schedule %s; %s\n",
                  layout.describe().c_str(), stage.layers, (long long)micro,
                  (long long)(opts.batch / micro), opts.schedule.c_str(), stage.plan.c_str());
  }

  // Evaluation on the replica's shard of the test set, through the pipeline.
  auto runEval = [&]() {
    model->eval();
    EvalResult r = evaluate([&](const torch::Tensor& x) { return pipeline.predict(x, x.size(0)); },
                            testSet.images, testSet.labels, *dp);
    model->train();
    return r;
  };
  const int64_t firstStep = progress.steps;
  resetPeakRss();
  const int64_t rssAtStartKb = statusKb("VmRSS");
  bool stop = false;
  for (int64_t epoch = progress.epochsDone; epoch < opts.epochs && !stop; ++epoch) {
    sampler.setEpoch(epoch);
    std::vector<int64_t> mine = sampler.indices();
    int64_t shardSteps = stepsPerEpoch;  // --elastic: steps of `mine` (changes after a loss)
    ElasticPosition pos;                 // samples of the epoch that completed steps used
    ProgressBar bar(talk && opts.progress, stepsPerEpoch,
                    "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(opts.epochs));
    PipelineStage::Tally tally;
    const double waitBefore = waitedSeconds();
    const auto epochStart = std::chrono::steady_clock::now();
    int64_t stepsThisEpoch = 0;
    for (int64_t step = 0; step < shardSteps; ++step) {
      if (opts.maxSteps > 0 && progress.steps >= opts.maxSteps) {
        stop = true;
        break;
      }
      const bool tracing = trace.enabled() && progress.steps - firstStep < opts.traceSteps;
      ddp.setTracing(tracing);
      const auto stepStart = std::chrono::steady_clock::now();
      const int64_t microAtStart = progress.microSteps;
      try {
        for (int64_t m = 0; m < opts.accum; ++m) {
          int64_t at = (step * opts.accum + m) * opts.batch;
          torch::Tensor idx = torch::from_blob(mine.data() + at, {opts.batch}, torch::kLong);
          // The first stage reads the images, the last the labels (every rank has the data).
          torch::Tensor x, y;
          if (layout.firstStage()) x = trainSet.images.index_select(0, idx);
          if (layout.lastStage()) y = trainSet.labels.index_select(0, idx);
          // Each micro-batch's loss is a mean over its samples; dividing by accum x micro makes
          // the accumulated gradient the mean over all accum x batch samples. DDP all-reduces
          // on the last backward of the last round (no_sync for the others).
          pipeline.runRound(x, y, opts.batch, micro, 1.0 / double(opts.accum * micro),
                            m == opts.accum - 1, bufferSync, tracing, progress.steps, &tally);
          progress.microSteps += micro;
        }
      } catch (const std::exception& e) {
        if (!opts.elastic) throw;
        // A rank died (or was cut off): go on with the survivors from the last completed
        // step, on what is left of this epoch (trainer/elastic.h).
        pos.steps = progress.steps;
        pos.microSteps = microAtStart;
        elasticRecover(comm, ddp, optimizer, &pos, e.what(), secondsSince(stepStart));
        rank = comm.rank();
        world = comm.size();
        talk = rank == 0;
        progress.steps = pos.steps;
        progress.microSteps = pos.microSteps;
        sampler = DistributedSampler(n, rank, world, /*shuffle=*/true, opts.seed);
        sampler.setEpoch(epoch);
        mine = elasticShard(sampler.paddedOrder(), n, pos.consumed, rank, world);
        shardSteps = int64_t(mine.size()) / (opts.batch * opts.accum);
        stepsPerEpoch = sampler.samplesPerRank() / opts.batch / opts.accum;
        layout.world = world;  // --elastic runs are pure data parallel (checked at start)
        layout.rank = rank;
        layout.dp = world;
        layout.dpRank = rank;
        step = -1;
        continue;
      }
      double t3 = trace.nowUs();
      optimizer.step();
      optimizer.zero_grad();
      if (tracing) trace.span("optimizer step", TraceWriter::kMainLane, t3, trace.nowUs());
      ++progress.steps;
      ++stepsThisEpoch;
      pos.consumed += opts.batch * opts.accum * world;
      bar.update(step + 1, tally.samples > 0 ? tally.lossSum / tally.samples
                                             : std::numeric_limits<double>::quiet_NaN());
    }
    bar.finish();
    const double trainSeconds = secondsSince(epochStart);
    // Rank 0's running statistics everywhere before evaluating or saving (each rank has
    // updated its own from its last local batch since the last forward's broadcast).
    if (bufferSync) ddp.syncBuffers();
    const double commSeconds = waitedSeconds() - waitBefore;

    // Epoch summary over all ranks (the samples counted once per replica: last stage, TP 0).
    const double keep = countsSamples ? 1.0 : 0.0;
    torch::Tensor sums = torch::tensor(
        {keep * tally.lossSum, keep * tally.correct, keep * tally.samples, trainSeconds},
        torch::kDouble);
    allReduceTensor(comm, sums, chorusSum);
    const double samples = sums[2].item<double>();
    const double wall = sums[3].item<double>() / world;  // mean over ranks
    std::string testAcc = "-";
    if (opts.eval) {
      EvalResult r = runEval();
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * r.accuracy());
      testAcc = buf;
    }
    if (stepsThisEpoch > 0) progress.epochsDone = epoch + 1;
    if (talk && samples > 0)
      std::printf(
          "epoch %lld/%lld  loss %.4f  train-acc %.2f%%  test-acc %s  samples/s %.0f  "
          "comm %.2fs  compute %.2fs  (%lld steps)\n",
          (long long)epoch + 1, (long long)opts.epochs, sums[0].item<double>() / samples,
          100.0 * sums[1].item<double>() / samples, testAcc.c_str(), samples / wall, commSeconds,
          trainSeconds - commSeconds, (long long)stepsThisEpoch);
    std::fflush(stdout);
    if (!opts.checkpoint.empty() && !stop)
      saveCheckpoint(opts.checkpoint, *model, optimizer, progress, comm, layout);
  }

  if (progress.epochsDone >= opts.epochs && opts.eval && progress.steps == firstStep) {
    // Nothing left to train (a resumed, finished run): just evaluate.
    EvalResult r = runEval();
    if (talk)
      std::printf("test-acc %.4f%% (%lld of %lld)\n", 100.0 * r.accuracy(), (long long)r.correct,
                  (long long)r.total);
  }
  if (!opts.dumpParams.empty()) {
    // Collective (the whole model is gathered on every rank), so every rank takes part even
    // when only rank 0 writes.
    NamedTensors params, buffers;
    if (layout.pureDataParallel()) {
      for (auto& item : model->named_parameters()) params.emplace_back(item.key(), item.value());
      for (auto& item : model->named_buffers()) buffers.emplace_back(item.key(), item.value());
    } else {
      gatherFullState(stage, layout, comm, &params, &buffers);
    }
    std::string dump = perRankPath(opts.dumpParams, rank);
    if (!dump.empty())
      dumpTensors(dump, params, buffers, progress, dp->allReduceCalls(), ddp.numBuckets(),
                  {{"stage", layout.stage},
                   {"peak_in_flight", pipeline.peakInFlight()},
                   {"rss_before_training_kb", rssAtStartKb},
                   {"peak_rss_kb", peakRssKb()}});
  }
  std::string tracePath = perRankPath(opts.trace, rank);
  if (!tracePath.empty()) trace.write(tracePath);
  comm.barrier();
}

}  // namespace trainer
