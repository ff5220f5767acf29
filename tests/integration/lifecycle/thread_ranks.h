// thread_ranks.h — ranks as threads of one process, for the lifecycle tests: run a body on
// one thread per rank, and initialise a communicator per rank with a config timeout.
#pragma once

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "chorus.h"

// Runs fn(rank, comm) on one thread per rank and joins them.
template <class F>
void onRanks(std::vector<chorusComm_t>& comms, F fn) {
  std::vector<std::thread> t;
  for (size_t r = 0; r < comms.size(); ++r)
    t.emplace_back([&, r] { fn(static_cast<int>(r), comms[r]); });
  for (auto& x : t) x.join();
}

// One communicator per rank of a world of n, each rank's init on its own thread, with
// cfg.timeoutSeconds = seconds (a missing peer turns into chorusTimeout, not a hang).
inline std::vector<chorusComm_t> initThreadRanks(int n, int seconds) {
  chorusUniqueId id;
  EXPECT_EQ(chorusGetUniqueId(&id), chorusSuccess);
  std::vector<chorusComm_t> comms(static_cast<size_t>(n), nullptr);
  onRanks(comms, [&](int r, chorusComm_t&) {
    chorusConfig_t cfg = CHORUS_CONFIG_INITIALIZER;
    cfg.timeoutSeconds = seconds;
    EXPECT_EQ(chorusCommInitRankConfig(&comms[static_cast<size_t>(r)], n, id, r, &cfg),
              chorusSuccess);
  });
  return comms;
}
