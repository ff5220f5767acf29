#include "trainer/models.h"

#include <stdexcept>

#include "trainer/sync_batch_norm.h"

namespace trainer {
namespace {

torch::nn::Sequential makeMlp() {
  return torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(),
                               torch::nn::Linear(256, 128), torch::nn::ReLU(),
                               torch::nn::Linear(128, 10));
}

void addBatchNorm(torch::nn::Sequential& net, int64_t channels, bool syncBn, Comm* comm) {
  if (syncBn)
    net->push_back(SyncBatchNorm(channels, comm));
  else
    net->push_back(torch::nn::BatchNorm2d(channels));
}

torch::nn::Sequential makeCnn(int64_t width, bool syncBn, Comm* comm) {
  using namespace torch::nn;
  Sequential net;
  net->push_back(Conv2d(Conv2dOptions(1, width, 3).padding(1)));
  addBatchNorm(net, width, syncBn, comm);
  net->push_back(ReLU());
  net->push_back(MaxPool2d(2));
  net->push_back(Conv2d(Conv2dOptions(width, 2 * width, 3).padding(1)));
  addBatchNorm(net, 2 * width, syncBn, comm);
  net->push_back(ReLU());
  net->push_back(MaxPool2d(2));
  net->push_back(Flatten());
  net->push_back(Linear(2 * width * 7 * 7, 128));
  net->push_back(ReLU());
  net->push_back(Linear(128, 10));
  return net;
}

}  // namespace

torch::nn::Sequential makeModel(const std::string& name, int64_t width, bool syncBn, Comm* comm) {
  if (name == "mlp") return makeMlp();
  if (name == "cnn") return makeCnn(width, syncBn, comm);
  throw std::invalid_argument("unknown model '" + name + "'");
}

}  // namespace trainer
