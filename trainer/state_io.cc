#include "trainer/state_io.h"

#include <cstdio>
#include <stdexcept>

namespace trainer {

namespace {

std::string shardPath(const std::string& path, const Layout& layout) {
  if (layout.stage == 0 && layout.tpRank == 0) return path;
  return path + ".stage" + std::to_string(layout.stage) + ".tp" + std::to_string(layout.tpRank);
}

}  // namespace

void saveCheckpoint(const std::string& path, torch::nn::Module& model,
                    torch::optim::Optimizer& optimizer, const Progress& progress, Comm& comm,
                    const Layout& layout) {
  comm.barrier();  // every rank has finished the epoch: the state is final
  if (layout.dpRank == 0) {
    const std::string file = shardPath(path, layout);
    torch::serialize::OutputArchive archive, modelArchive, optimizerArchive;
    model.save(modelArchive);
    optimizer.save(optimizerArchive);
    archive.write("model", modelArchive);
    archive.write("optimizer", optimizerArchive);
    archive.write("progress",
                  torch::tensor({progress.epochsDone, progress.steps, progress.microSteps}));
    archive.write("world_size", torch::tensor({int64_t(comm.size())}));  // --elastic shrinks it
    archive.write("layout", torch::tensor({int64_t(layout.pp), int64_t(layout.tp)}));
    std::string tmp = file + ".tmp";
    archive.save_to(tmp);
    if (std::rename(tmp.c_str(), file.c_str()) != 0)
      throw std::runtime_error("cannot rename " + tmp + " to " + file);
  }
  comm.barrier();  // nobody reads it (or starts the next save) before it is complete
}

Progress loadCheckpoint(const std::string& path, torch::nn::Module& model,
                        torch::optim::Optimizer& optimizer, Comm& comm, const Layout& layout) {
  comm.barrier();
  // The layout first, from FILE (checkpoints from before layouts: 1 stage, no TP).
  int64_t savedPp = 1, savedTp = 1;
  try {
    torch::serialize::InputArchive head;
    head.load_from(path);
    torch::Tensor l;
    if (head.try_read("layout", l)) {
      if (l.numel() != 2) throw std::runtime_error("checkpoint " + path + ": bad layout record");
      savedPp = l[0].item<int64_t>();
      savedTp = l[1].item<int64_t>();
    }
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot load checkpoint " + path + ": " + e.what_without_backtrace());
  }
  if (savedPp != layout.pp || savedTp != layout.tp)
    throw std::runtime_error("checkpoint " + path + " was saved with --pipeline-stages " +
                             std::to_string(savedPp) + " --tensor-parallel " +
                             std::to_string(savedTp) + "; this run has " +
                             std::to_string(layout.pp) + " and " + std::to_string(layout.tp) +
                             " (resume with the same layout)");
  const std::string file = shardPath(path, layout);
  torch::serialize::InputArchive archive, modelArchive, optimizerArchive;
  try {
    archive.load_from(file);
    archive.read("model", modelArchive);
    archive.read("optimizer", optimizerArchive);
    model.load(modelArchive);
    optimizer.load(optimizerArchive);
  } catch (const c10::Error& e) {
    throw std::runtime_error("cannot load checkpoint " + file + ": " + e.what_without_backtrace());
  }
  torch::Tensor p;
  archive.read("progress", p);
  if (p.numel() != 3) throw std::runtime_error("checkpoint " + path + ": bad progress record");
  comm.barrier();
  return {p[0].item<int64_t>(), p[1].item<int64_t>(), p[2].item<int64_t>()};
}

void dumpParams(const std::string& path, torch::nn::Module& model, const Progress& progress,
                uint64_t allReduceCalls, size_t buckets) {
  NamedTensors params, buffers;
  for (auto& item : model.named_parameters()) params.emplace_back(item.key(), item.value());
  for (auto& item : model.named_buffers()) buffers.emplace_back(item.key(), item.value());
  dumpTensors(path, params, buffers, progress, allReduceCalls, buckets, {});
}

void dumpTensors(const std::string& path, const NamedTensors& params, const NamedTensors& buffers,
                 const Progress& progress, uint64_t allReduceCalls, size_t buckets,
                 const std::vector<std::pair<std::string, int64_t>>& extraCounters) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  std::fprintf(f, "# chorus-train parameter dump\n");
  std::fprintf(f, "counter allreduce_calls %llu\n", (unsigned long long)allReduceCalls);
  std::fprintf(f, "counter optimizer_steps %lld\n", (long long)progress.steps);
  std::fprintf(f, "counter micro_steps %lld\n", (long long)progress.microSteps);
  std::fprintf(f, "counter buckets %zu\n", buckets);
  for (auto& c : extraCounters)
    std::fprintf(f, "counter %s %lld\n", c.first.c_str(), (long long)c.second);
  auto write = [&](const std::string& kind, const std::string& name, const torch::Tensor& t) {
    torch::Tensor v = t.detach().to(torch::kDouble).contiguous().reshape(-1);
    std::fprintf(f, "%s %s %lld\n", kind.c_str(), name.c_str(), (long long)v.numel());
    const double* d = v.data_ptr<double>();
    for (int64_t i = 0; i < v.numel(); ++i) std::fprintf(f, i ? " %.17g" : "%.17g", d[i]);
    std::fprintf(f, "\n");
  };
  for (auto& item : params) write("param", item.first, item.second);
  for (auto& item : buffers) write("buffer", item.first, item.second);
  if (std::fclose(f) != 0) throw std::runtime_error("error writing " + path);
}

}  // namespace trainer
