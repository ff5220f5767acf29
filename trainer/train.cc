#include "trainer/train.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "trainer/dataset.h"
#include "trainer/ddp.h"
#include "trainer/elastic.h"
#include "trainer/evaluate.h"
#include "trainer/models.h"
#include "trainer/progress.h"
#include "trainer/sampler.h"
#include "trainer/state_io.h"
#include "trainer/torch_chorus.h"
#include "trainer/trace.h"

namespace trainer {
namespace {

// Fashion-MNIST pixel mean and standard deviation (of the training set, in [0,1]).
constexpr double kPixelMean = 0.2860, kPixelStd = 0.3530;

struct Split {
  torch::Tensor images;  // [n,1,rows,cols], normalized
  torch::Tensor labels;  // [n], int64
};

Split toTensors(const ImageSet& s, int64_t limit, torch::ScalarType type) {
  int64_t n = limit > 0 ? std::min(limit, s.count) : s.count;
  auto* pixels = const_cast<uint8_t*>(s.pixels.data());
  auto* labels = const_cast<uint8_t*>(s.labels.data());
  Split out;
  out.images = torch::from_blob(pixels, {n, 1, s.rows, s.cols}, torch::kUInt8)
                   .to(type)
                   .div_(255.0)
                   .sub_(kPixelMean)
                   .div_(kPixelStd);
  out.labels = torch::from_blob(labels, {n}, torch::kUInt8).to(torch::kLong);
  return out;
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Loss sum, correct predictions and samples of this rank's micro-batches in one epoch.
struct EpochTally {
  double lossSum = 0, correct = 0, samples = 0;
};

}  // namespace

void train(const Options& opts, Comm& comm) {
  int rank = comm.rank(), world = comm.size();  // --elastic: both change when ranks die
  bool talk = rank == 0;                        // logging from rank 0 only
  const torch::ScalarType dtype = opts.useDouble ? torch::kDouble : torch::kFloat;

  Split trainSet = toTensors(loadFashionMnist(opts.dataDir, "train"), opts.trainLimit, dtype);
  Split testSet;
  if (opts.eval) testSet = toTensors(loadFashionMnist(opts.dataDir, "t10k"), opts.testLimit, dtype);

  // Same initial weights everywhere (and rank 0's are broadcast anyway).
  torch::manual_seed(opts.seed);
  torch::nn::Sequential model = makeModel(opts.model, opts.width, opts.syncBn, &comm);
  model->to(dtype);
  TraceWriter trace(!perRankPath(opts.trace, rank).empty(), rank);
  const double mb = 1024.0 * 1024.0;
  DistributedDataParallel ddp(*model, comm, trace, size_t(opts.bucketMb * mb),
                              size_t(opts.firstBucketMb * mb));
  ddp.setOverlap(opts.overlap);
  ddp.broadcastState();
  // From here on, randomness that must differ between ranks (dropout, augmentation) does.
  torch::manual_seed(opts.seed + 1000003ull * uint64_t(rank + 1));

  torch::optim::SGD optimizer(
      model->parameters(),
      torch::optim::SGDOptions(opts.lr).momentum(opts.momentum).weight_decay(opts.weightDecay));
  Progress progress;
  if (!opts.resume.empty()) {
    progress = loadCheckpoint(opts.resume, *model, optimizer, comm);
    ddp.broadcastState();
    if (talk)
      std::printf("resumed from %s after epoch %lld (%lld steps)\n", opts.resume.c_str(),
                  (long long)progress.epochsDone, (long long)progress.steps);
  }
  const bool bufferSync = !opts.syncBn;  // sync-BN buffers are equal by construction

  const int64_t n = trainSet.images.size(0);
  DistributedSampler sampler(n, rank, world, /*shuffle=*/true, opts.seed);
  const int64_t microPerEpoch = sampler.samplesPerRank() / opts.batch;
  int64_t stepsPerEpoch = microPerEpoch / opts.accum;
  if (stepsPerEpoch == 0)
    throw std::invalid_argument("--batch x --accum (" + std::to_string(opts.batch * opts.accum) +
                                ") exceeds the " + std::to_string(sampler.samplesPerRank()) +
                                " samples of each rank");
  if (talk)
    std::printf(
        "chorus-train: model %s, %d rank(s) (%s), batch %lld per rank x %d rank(s) x "
        "accum %lld = %lld per step, %lld steps/epoch, %zu gradient bucket(s), "
        "sync-bn %s, %d torch thread(s) per rank, %s\n",
        opts.model.c_str(), world, comm.how(), (long long)opts.batch, world, (long long)opts.accum,
        (long long)(opts.batch * world * opts.accum), (long long)stepsPerEpoch, ddp.numBuckets(),
        opts.syncBn ? "on" : "off", opts.threads, opts.useDouble ? "float64" : "float32");

  const int64_t firstStep = progress.steps;
  bool stop = false;
  for (int64_t epoch = progress.epochsDone; epoch < opts.epochs && !stop; ++epoch) {
    sampler.setEpoch(epoch);
    std::vector<int64_t> mine = sampler.indices();
    int64_t shardSteps = stepsPerEpoch;  // --elastic: steps of `mine` (changes after a loss)
    ElasticPosition pos;                 // samples of the epoch that completed steps used
    ProgressBar bar(talk && opts.progress, stepsPerEpoch,
                    "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(opts.epochs));
    EpochTally tally;
    const double waitBefore = comm.waitSeconds();
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
          ddp.setSync(m == opts.accum - 1);  // no_sync for all but the last micro-batch
          int64_t at = (step * opts.accum + m) * opts.batch;
          torch::Tensor idx = torch::from_blob(mine.data() + at, {opts.batch}, torch::kLong);
          torch::Tensor x = trainSet.images.index_select(0, idx);
          torch::Tensor y = trainSet.labels.index_select(0, idx);
          if (bufferSync) ddp.syncBuffers();
          double t0 = trace.nowUs();
          torch::Tensor logits = model->forward(x);
          torch::Tensor loss = torch::nn::functional::cross_entropy(logits, y);
          double t1 = trace.nowUs();
          ddp.prepareBackward();
          // Each micro-batch's loss is a mean over its samples; dividing by accum makes the
          // accumulated gradient the mean over all accum x batch samples.
          (loss / double(opts.accum)).backward();
          double t2 = trace.nowUs();
          ddp.finishBackward();
          if (tracing) {
            trace.span("forward", TraceWriter::kMainLane, t0, t1);
            trace.span(
                "backward", TraceWriter::kMainLane, t1, t2,
                "\"step\":" + std::to_string(progress.steps) + ",\"micro\":" + std::to_string(m));
          }
          tally.lossSum += loss.item<double>() * double(opts.batch);
          tally.correct += double(logits.argmax(1).eq(y).sum().item<int64_t>());
          tally.samples += double(opts.batch);
          ++progress.microSteps;
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
      bar.update(step + 1, tally.samples > 0 ? tally.lossSum / tally.samples : 0.0);
    }
    bar.finish();
    const double trainSeconds = secondsSince(epochStart);
    // Rank 0's running statistics everywhere before evaluating or saving (each rank has
    // updated its own from its last local batch since the last forward's broadcast).
    if (bufferSync) ddp.syncBuffers();
    const double commSeconds = comm.waitSeconds() - waitBefore;

    // Epoch summary over all ranks.
    torch::Tensor sums =
        torch::tensor({tally.lossSum, tally.correct, tally.samples, trainSeconds}, torch::kDouble);
    allReduceTensor(comm, sums, chorusSum);
    const double samples = sums[2].item<double>();
    const double wall = sums[3].item<double>() / world;  // mean over ranks
    std::string testAcc = "-";
    if (opts.eval) {
      EvalResult r = evaluate(model, testSet.images, testSet.labels, comm);
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
      saveCheckpoint(opts.checkpoint, *model, optimizer, progress, comm);
  }

  if (progress.epochsDone >= opts.epochs && opts.eval && progress.steps == firstStep) {
    // Nothing left to train (a resumed, finished run): just evaluate.
    EvalResult r = evaluate(model, testSet.images, testSet.labels, comm);
    if (talk)
      std::printf("test-acc %.4f%% (%lld of %lld)\n", 100.0 * r.accuracy(), (long long)r.correct,
                  (long long)r.total);
  }
  std::string dump = perRankPath(opts.dumpParams, rank);
  if (!dump.empty()) dumpParams(dump, *model, progress, comm.allReduceCalls(), ddp.numBuckets());
  std::string tracePath = perRankPath(opts.trace, rank);
  if (!tracePath.empty()) trace.write(tracePath);
  comm.barrier();
}

}  // namespace trainer
