#include "trainer/state_io.h"

#include <cstdio>
#include <stdexcept>

namespace trainer {

void saveCheckpoint(const std::string& path, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer, const Progress& progress, Comm& comm) {
  comm.barrier();  // every rank has finished the epoch: the state is final
  if (comm.rank() == 0) {
    torch::serialize::OutputArchive archive, modelArchive, optimizerArchive;
    model.save(modelArchive);
    optimizer.save(optimizerArchive);
    archive.write("model", modelArchive);
    archive.write("optimizer", optimizerArchive);
    archive.write("progress",
                  torch::tensor({progress.epochsDone, progress.steps, progress.microSteps}));
    archive.write("world_size", torch::tensor({int64_t(comm.size())}));  // --elastic shrinks it
    std::string tmp = path + ".tmp";
    archive.save_to(tmp);
    if (std::rename(tmp.c_str(), path.c_str()) != 0)
      throw std::runtime_error("cannot rename " + tmp + " to " + path);
  }
  comm.barrier();  // nobody reads it (or starts the next save) before it is complete
}

Progress loadCheckpoint(const std::string& path, torch::nn::Module& model,
                        torch::optim::Optimizer& optimizer, Comm& comm) {
  comm.barrier();
  torch::serialize::InputArchive archive, modelArchive, optimizerArchive;
  try {
    archive.load_from(path);
    archive.read("model", modelArchive);
    archive.read("optimizer", optimizerArchive);
    model.load(modelArchive);
    optimizer.load(optimizerArchive);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot load checkpoint " + path + ": " + e.what_without_backtrace());
  }
  torch::Tensor p;
  archive.read("progress", p);
  if (p.numel() != 3) throw std::runtime_error("checkpoint " + path + ": bad progress record");
  comm.barrier();
  return {p[0].item<int64_t>(), p[1].item<int64_t>(), p[2].item<int64_t>()};
}

void dumpParams(const std::string& path, torch::nn::Module& model, const Progress& progress,
                uint64_t allReduceCalls, size_t buckets) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  std::fprintf(f, "# chorus-train parameter dump\n");
  std::fprintf(f, "counter allreduce_calls %llu\n", (unsigned long long)allReduceCalls);
  std::fprintf(f, "counter optimizer_steps %lld\n", (long long)progress.steps);
  std::fprintf(f, "counter micro_steps %lld\n", (long long)progress.microSteps);
  std::fprintf(f, "counter buckets %zu\n", buckets);
  auto write = [&](const std::string& kind, const std::string& name, const torch::Tensor& t) {
    torch::Tensor v = t.detach().to(torch::kDouble).contiguous().reshape(-1);
    std::fprintf(f, "%s %s %lld\n", kind.c_str(), name.c_str(), (long long)v.numel());
    const double* d = v.data_ptr<double>();
    for (int64_t i = 0; i < v.numel(); ++i) std::fprintf(f, i ? " %.17g" : "%.17g", d[i]);
    std::fprintf(f, "\n");
  };
  for (auto& item : model.named_parameters()) write("param", item.key(), item.value());
  for (auto& item : model.named_buffers()) write("buffer", item.key(), item.value());
  if (std::fclose(f) != 0) throw std::runtime_error("error writing " + path);
}

}  // namespace trainer
