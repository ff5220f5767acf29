// ps_shards.h — what the parameter-server ranks share (ps_train.h): roles, the model's
// parameters cut by the plan, the message header, traffic counters.
#pragma once

#include <chorus.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "trainer/comm.h"
#include "trainer/options.h"
#include "trainer/ps_plan.h"

namespace trainer {

// Who does what. Server k is rank k in both layouts; worker w is rank w (colocated) or
// K + w (dedicated servers).
struct PsRoles {
  int servers = 0, workers = 0;
  bool colocated = false;
  bool serves = false, works = false;
  int workerIndex = -1;
  int workerRank(int w) const { return colocated ? w : servers + w; }
};

/// Throws std::invalid_argument for a layout without a worker (before any communication).
PsRoles makePsRoles(const Options& o, int world, int rank);

// A push: header {kind, worker clock, rows pushed, rows to pull}; then, from the worker to
// the server, one int64 message with the pushed then the pulled row ids (when there are
// any) and one float message with the dense gradients then the pushed rows' gradients;
// back, one float message with the dense parameters then the pulled rows. Dense models
// push and pull no rows. kPullOnly: no gradient (a worker refreshing its table). kLost
// (async/ssp): header[1] is a worker the surviving workers found dead; stop waiting for it.
enum : int64_t { kPush = 1, kDone = 2, kPullOnly = 3, kLost = 4 };
constexpr size_t kHeader = 4;

inline chorusDataType_t chorusTypeOf(torch::ScalarType t) {
  return t == torch::kDouble ? chorusFloat64 : chorusFloat32;
}

// The model's parameters as the plan sees them. `table` (--model hashed): the parameter
// whose rows travel sparsely; its shards are the rows [rowBegin, rowEnd) of each server.
struct Sharded {
  PsPlan plan;
  std::vector<torch::Tensor> params;  // model order
  int table = -1;
  int64_t dim = 0;  // elements per table row

  bool isTable(size_t shard) const {
    return table >= 0 && plan.shards[shard].tensor == size_t(table);
  }
  /// Server k's shards that travel whole (all of them for a dense model).
  std::vector<size_t> denseShardsOf(int k) const;
  /// Server k's table shard, or -1.
  int tableShardOf(int k) const;
  int64_t denseCount(int k) const;
  /// The flat view of shard i in its parameter (or the parameter's gradient).
  torch::Tensor view(size_t i, bool grad) const;
  /// Server k's dense shards (all shards: `all`) of the parameters or gradients, flat.
  torch::Tensor gather(int k, bool grad, bool all = false) const;
  /// Copies server k's dense part (`flat`, as gather made it) into the parameters.
  void scatter(int k, const torch::Tensor& flat);
};

Sharded shardModel(torch::nn::Sequential& model, int servers, bool sparseTable);

// Bytes a rank moved in push/pull traffic, and the steps they were spread over.
struct Traffic {
  double bytes = 0;
  int64_t steps = 0;
};

/// The server loop of rank k (dedicated servers), until every worker is done.
void servePs(const Options& opts, Comm& comm, const PsRoles& roles, Sharded& sh, Traffic* traffic);

}  // namespace trainer
