#include "trainer/dataset.h"

#include <sys/stat.h>

#include <stdexcept>

#include "trainer/idx.h"

namespace trainer {
namespace {

bool fileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Debian ships the .gz files; an unpacked copy next to them is accepted too.
std::string findFile(const std::string& dir, const std::string& base) {
  for (const std::string& p : {dir + "/" + base + ".gz", dir + "/" + base})
    if (fileExists(p)) return p;
  throw std::runtime_error("Fashion-MNIST file " + dir + "/" + base +
                           ".gz not found; install it with `sudo apt-get install "
                           "dataset-fashion-mnist` or point --data-dir at a copy");
}

}  // namespace

ImageSet loadFashionMnist(const std::string& dir, const std::string& split, int64_t limit) {
  IdxArray images = readIdx(findFile(dir, split + "-images-idx3-ubyte"), 3, limit);
  IdxArray labels = readIdx(findFile(dir, split + "-labels-idx1-ubyte"), 1, limit);
  if (images.items() != labels.items())
    throw std::runtime_error("Fashion-MNIST " + split + ": " + std::to_string(images.items()) +
                             " images but " + std::to_string(labels.items()) + " labels");
  for (uint8_t l : labels.data)
    if (l > 9) throw std::runtime_error("Fashion-MNIST " + split + ": label out of range 0..9");
  ImageSet s;
  s.count = images.dims[0];
  s.rows = images.dims[1];
  s.cols = images.dims[2];
  s.pixels = std::move(images.data);
  s.labels = std::move(labels.data);
  return s;
}

}  // namespace trainer
