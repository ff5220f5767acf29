// ps_train.h — parameter-server training (--ps-servers K / --ps-colocated), docs/TRAINER.md
// "Parameter server".
//
// Dedicated servers: ranks 0..K-1 hold the parameter shards (ps_plan.h) and their optimizer
// state (ps_optimizer.h); ranks K.. are workers. Each step a worker sends one push per
// server (a 4-element header, then its gradients for that server's shards, in one
// chorusGroupStart/End with the pull of the fresh parameters); a server takes the next
// push from any worker with chorusRecvAnySource (the header), then that worker's payload
// with chorusRecv. Modes: sync (wait for every worker, average in worker order, update,
// reply to all: equals data parallel), async (apply each push on arrival, reply at once),
// ssp (apply on arrival, reply only while the pusher is at most --staleness steps ahead of
// the slowest worker still training).
// Colocated (sync only): every rank is a worker and serves shard `rank`; the pushes and
// pulls are two grouped all-pairs exchanges per step.
#pragma once

#include "trainer/comm.h"
#include "trainer/options.h"

namespace trainer {

/// Trains as `opts` says (opts.ps). Throws on errors, before any communication for a bad
/// layout (the same check on every rank).
void trainPs(const Options& opts, Comm& comm);

}  // namespace trainer
