// chorus-train — data-parallel training on Fashion-MNIST: libtorch computes, Chorus
// carries every byte between ranks. See docs/TRAINER.md.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "trainer/comm.h"
#include "trainer/options.h"
#include "trainer/train.h"

int main(int argc, char** argv) {
  trainer::Options opts;
  try {
    if (!trainer::parseOptions(argc, argv, &opts)) return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-train: %s\n", e.what());
    return 2;
  }
  // One intra-op thread per rank by default: ranks share the machine's cores, and
  // libtorch's default (one thread per core in every rank) oversubscribes them.
  torch::set_num_threads(opts.threads);
  torch::set_num_interop_threads(1);
  try {
    trainer::Comm comm;
    trainer::train(opts, comm);
  } catch (const std::exception& e) {
    // A failed rank must not leave the others waiting: exit at once; the launcher stops
    // the job, and peers see this rank gone (chorusRemoteError) instead of hanging.
    std::fprintf(stderr, "chorus-train: error: %s\n", e.what());
    std::fflush(stdout);
    std::fflush(stderr);
    std::_Exit(1);
  }
  return 0;
}
