// dataset.h — Fashion-MNIST as Debian's dataset-fashion-mnist package installs it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

/// One split: `count` images of rows x cols bytes (row-major) and their labels 0..9.
struct ImageSet {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;
  std::vector<uint8_t> labels;
};

/// Loads split "train" or "t10k" from `dir`: its first `limit` samples where limit > 0
/// (--train-limit, --test-limit), else all. Throws std::runtime_error with the apt command
/// to run when the files are missing, or with what is wrong with them.
ImageSet loadFashionMnist(const std::string& dir, const std::string& split, int64_t limit = 0);

}  // namespace trainer
