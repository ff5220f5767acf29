// The server side of parameter-server training (ps_shards.h servePs; modes in ps_train.h).
#include <algorithm>
#include <climits>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/ps_optimizer.h"
#include "trainer/ps_shards.h"

namespace trainer {
namespace {

// One message from a worker, decoded.
struct Message {
  int worker = -1;
  int64_t kind = 0;
  torch::Tensor grad;  // kPush: the gradient of the whole shard buffer (zero off the rows)
  torch::Tensor pull;  // table rows to send back (global ids), or undefined
};

class Server {
 public:
  Server(const Options& opts, Comm& comm, const PsRoles& roles, Sharded& sh, Traffic* traffic)
      : opts_(opts), comm_(comm), roles_(roles), sh_(sh), traffic_(traffic), k_(comm.rank()) {
    flat_ = sh.gather(k_, false, /*all=*/true).clone();
    opt_.reset(
        new ShardOptimizer(opts.psOptimizer, flat_, opts.lr, opts.momentum, opts.weightDecay));
    type_ = chorusTypeOf(flat_.scalar_type());
    elemBytes_ = double(flat_.element_size());
    tableShard_ = sh.tableShardOf(k_);
    denseCount_ = sh.denseCount(k_);
    done_.assign(size_t(roles.workers), false);
    clock_.assign(size_t(roles.workers), 0);
    live_ = roles.workers;
  }

  void run() {
    if (opts_.psMode == "sync")
      runSync();
    else
      runAsync(opts_.psMode == "ssp");
  }

 private:
  std::string who() const { return "parameter server " + std::to_string(k_); }

  // The table shard's rows as [rows, dim] (of the buffer or of a gradient like it).
  torch::Tensor tableRows(const torch::Tensor& buf) const {
    const PsShard& s = sh_.plan.shards[size_t(tableShard_)];
    return buf.slice(0, s.serverOffset, s.serverOffset + s.count).view({-1, sh_.dim});
  }
  int64_t rowBegin() const { return sh_.plan.shards[size_t(tableShard_)].rowBegin; }

  // Takes the next message from any worker (chorusRecvAnySource on the header).
  Message take() {
    int64_t h[kHeader];
    const int peer = comm_.recvAny(h, kHeader, chorusInt64, "ps push header (any worker)");
    Message m;
    m.worker = peer - (roles_.colocated ? 0 : roles_.servers);
    m.kind = h[0];
    if (m.worker < 0 || m.worker >= roles_.workers || done_[size_t(m.worker)] ||
        (m.kind != kPush && m.kind != kDone && m.kind != kPullOnly && m.kind != kLost))
      throw std::runtime_error(who() + ": unexpected message from rank " + std::to_string(peer));
    traffic_->bytes += double(sizeof h);
    if (m.kind == kLost) {  // every survivor reports it: count it once
      const int64_t lost = h[1];
      if (lost >= 0 && lost < roles_.workers && !done_[size_t(lost)]) {
        done_[size_t(lost)] = true;
        --live_;
        std::fprintf(stderr, "%s: worker %lld (rank %d) lost, carrying on with %d\n", who().c_str(),
                     (long long)lost, roles_.workerRank(int(lost)), live_);
      }
      return m;
    }
    if (m.kind == kDone) {
      done_[size_t(m.worker)] = true;
      --live_;
      return m;
    }
    const int64_t nPush = h[2], nPull = h[3];
    if ((nPush || nPull) && tableShard_ < 0)
      throw std::runtime_error(who() + ": rows pushed to a server without table rows");
    torch::Tensor ids = torch::empty({nPush + nPull}, torch::kLong);
    torch::Tensor payload =
        torch::empty({m.kind == kPush ? denseCount_ + nPush * sh_.dim : 0}, flat_.options());
    std::vector<Comm::P2p> ops;
    if (ids.numel() > 0)
      ops.push_back({false, ids.data_ptr(), size_t(ids.numel()), chorusInt64, peer});
    if (payload.numel() > 0)
      ops.push_back({false, payload.data_ptr(), size_t(payload.numel()), type_, peer});
    comm_.exchange(ops, "ps push payload");
    traffic_->bytes += double(ids.numel() * 8) + double(payload.numel()) * elemBytes_;
    if (nPull > 0) m.pull = ids.slice(0, nPush);
    if (m.kind != kPush) return m;
    if (opts_.psTestDropPushFrom == peer) payload.zero_();  // negative control only
    if (tableShard_ < 0) {
      m.grad = payload;  // dense: the payload is the buffer's gradient, in buffer order
    } else {
      m.grad = torch::zeros_like(flat_);
      int64_t at = 0;
      for (size_t i : sh_.denseShardsOf(k_)) {
        const PsShard& s = sh_.plan.shards[i];
        m.grad.slice(0, s.serverOffset, s.serverOffset + s.count)
            .copy_(payload.slice(0, at, at + s.count));
        at += s.count;
      }
      if (nPush > 0)
        tableRows(m.grad).index_add_(0, ids.slice(0, 0, nPush) - rowBegin(),
                                     payload.slice(0, at).view({nPush, sh_.dim}));
    }
    ++clock_[size_t(m.worker)];
    return m;
  }

  // Sends worker w its dense parameters and the table rows it asked for.
  void reply(int w, const torch::Tensor& pull) {
    torch::Tensor out = flat_;
    if (tableShard_ >= 0) {
      std::vector<torch::Tensor> parts;
      for (size_t i : sh_.denseShardsOf(k_)) {
        const PsShard& s = sh_.plan.shards[i];
        parts.push_back(flat_.slice(0, s.serverOffset, s.serverOffset + s.count));
      }
      if (pull.defined() && pull.numel() > 0)
        parts.push_back(tableRows(flat_).index_select(0, pull - rowBegin()).flatten());
      out = parts.empty() ? torch::empty({0}, flat_.options()) : torch::cat(parts);
    }
    if (out.numel() == 0) return;
    comm_.exchange({{true, out.data_ptr(), size_t(out.numel()), type_, roles_.workerRank(w)}},
                   "ps pull reply");
    traffic_->bytes += double(out.numel()) * elemBytes_;
  }

  // Every step: one push from every worker still training, averaged in worker order
  // whatever order they arrived in, one update, then the replies.
  void runSync() {
    const int W = roles_.workers;
    auto round = std::vector<Message>(size_t(W));
    while (live_ > 0) {
      std::vector<int> from;
      while (int(from.size()) < live_) {
        Message m = take();
        if (m.kind == kPullOnly) reply(m.worker, m.pull);
        if (m.kind != kPush) continue;
        from.push_back(m.worker);
        round[size_t(m.worker)] = m;
      }
      if (from.empty()) break;
      std::sort(from.begin(), from.end());
      torch::Tensor sum = round[size_t(from[0])].grad.clone();
      for (size_t i = 1; i < from.size(); ++i) sum.add_(round[size_t(from[i])].grad);
      sum.div_(double(from.size()));
      opt_->step(sum);
      traffic_->steps += int64_t(from.size());
      for (int w : from) reply(w, round[size_t(w)].pull);
    }
  }

  // Each push applied on arrival. ssp: the reply (the pull) waits while the pusher is more
  // than --staleness pushes ahead of the slowest worker still training.
  void runAsync(bool ssp) {
    const int W = roles_.workers;
    std::vector<Message> waiting;
    auto release = [&]() {
      int64_t slowest = INT64_MAX;
      for (int w = 0; w < W; ++w)
        if (!done_[size_t(w)]) slowest = std::min(slowest, clock_[size_t(w)]);
      std::vector<Message> still;
      for (Message& m : waiting) {
        if (clock_[size_t(m.worker)] - slowest <= opts_.staleness)
          reply(m.worker, m.pull);
        else
          still.push_back(m);
      }
      waiting.swap(still);
    };
    while (live_ > 0) {
      Message m = take();
      if (m.kind == kPullOnly) reply(m.worker, m.pull);
      if (m.kind == kPush) {
        // Weighted 1/workers: W pushes move the parameters as far as one sync step (the
        // average of W gradients) does; at full weight, W times the sync learning rate on
        // stale gradients diverges (MLP, 3 workers, lr 0.05: 47% after 1 epoch).
        opt_->step(m.grad.div_(double(W)));
        ++traffic_->steps;
        if (ssp)
          waiting.push_back(m);
        else
          reply(m.worker, m.pull);
      }
      if (ssp) release();
    }
  }

  const Options& opts_;
  Comm& comm_;
  const PsRoles& roles_;
  Sharded& sh_;
  Traffic* traffic_;
  const int k_;
  torch::Tensor flat_;  // this server's shards, in plan order
  std::unique_ptr<ShardOptimizer> opt_;
  chorusDataType_t type_;
  double elemBytes_ = 0;
  int tableShard_ = -1;
  int64_t denseCount_ = 0;
  std::vector<bool> done_;
  std::vector<int64_t> clock_;  // pushes taken from each worker
  int live_ = 0;
};

}  // namespace

void servePs(const Options& opts, Comm& comm, const PsRoles& roles, Sharded& sh, Traffic* traffic) {
  Server(opts, comm, roles, sh, traffic).run();
}

}  // namespace trainer
