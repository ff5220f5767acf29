#include "trainer/ps_train.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/models.h"
#include "trainer/ps_shards.h"
#include "trainer/ps_sparse.h"
#include "trainer/ps_worker.h"
#include "trainer/state_io.h"

namespace trainer {

void trainPs(const Options& opts, Comm& comm) {
  // Checked on every rank before any communication: a bad layout fails everywhere at once.
  const PsRoles roles = makePsRoles(opts, comm.size(), comm.rank());
  const bool hashed = opts.model == "hashed";
  if (hashed && roles.colocated)
    throw std::invalid_argument("--model hashed needs dedicated servers (--ps-servers K)");
  const torch::ScalarType dtype = opts.useDouble ? torch::kDouble : torch::kFloat;
  torch::manual_seed(opts.seed);  // the same initial weights on every rank
  torch::nn::Sequential model = hashed ? makeHashedModel(opts.hashBuckets)
                                       : makeModel(opts.model, opts.width, false, nullptr);
  model->to(dtype);
  Sharded sh = shardModel(model, roles.servers, hashed);
  if (comm.rank() == 0)
    std::printf("parameter-server plan (%d server(s), the same on every rank):\n%s", roles.servers,
                sh.plan.describe().c_str());
  std::fflush(stdout);
  // The workers' own group (evaluation, epoch sums); the dedicated servers split off too.
  std::unique_ptr<Comm> split;
  if (!roles.colocated) split.reset(new Comm(comm, roles.works ? 0 : 1, comm.rank(), "ps"));
  Comm& workers = roles.colocated ? comm : *split;

  Traffic traffic;
  Progress progress;
  if (roles.works) {
    progress = workPs(opts, comm, workers, roles, model, sh, &traffic);
  } else {
    servePs(opts, comm, roles, sh, &traffic);
    // A server counts pushes; per global step (one push from every worker): / workers.
    traffic.steps /= std::max(1, roles.workers);
  }
  // Bytes per step at the busiest worker and the busiest server. No collective over the
  // world here (a worker may have died in async/ssp mode): the workers reduce theirs, each
  // server sends its figure to worker 0, which prints.
  const double perStep = traffic.steps > 0 ? traffic.bytes / double(traffic.steps) : 0;
  double most[2] = {roles.works ? perStep : 0, roles.serves ? perStep : 0};
  const int firstWorker = roles.workerRank(0);
  if (roles.colocated) {
    comm.allReduce(most, 2, chorusFloat64, chorusMax);
  } else if (roles.serves) {
    comm.exchange({{true, &most[1], 1, chorusFloat64, firstWorker}}, "ps traffic figure");
  } else {
    workers.allReduce(most, 1, chorusFloat64, chorusMax);
    if (roles.workerIndex == 0) {
      std::vector<double> fromServers(size_t(roles.servers), 0);
      std::vector<Comm::P2p> ops;
      for (int k = 0; k < roles.servers; ++k)
        ops.push_back({false, &fromServers[size_t(k)], 1, chorusFloat64, k});
      comm.exchange(ops, "ps traffic figures");
      for (double b : fromServers) most[1] = std::max(most[1], b);
    }
  }
  if (roles.workerIndex == 0) {
    std::printf(
        "ps traffic: %.0f bytes/step at the busiest worker (push + pull), %.0f at the "
        "busiest server\n",
        most[0], most[1]);
    if (hashed) {
      // What a dense push and pull of the same model would move (the whole table).
      double dense = 0;
      for (const auto& t : sh.params) dense += double(t.numel() * t.element_size());
      std::printf("sparse: %.0f bytes/step per worker = %.2f%% of a dense push + pull (%.0f)\n",
                  most[0], 100.0 * most[0] / (2 * dense), 2 * dense);
    }
  }
  if (roles.works && !opts.dumpParams.empty()) {
    // Numbered by worker: worker 0 writes "%r" -> 0 (a dense dump compares with rank 0 of a
    // data-parallel run).
    std::string dump = perRankPath(opts.dumpParams, roles.workerIndex);
    NamedTensors params, buffers;
    for (auto& item : model->named_parameters()) params.emplace_back(item.key(), item.value());
    for (auto& item : model->named_buffers()) buffers.emplace_back(item.key(), item.value());
    if (!dump.empty()) dumpTensors(dump, params, buffers, progress, 0, 0, {});
  }
  std::fflush(stdout);
  if (roles.works) workers.barrier();
}

}  // namespace trainer
