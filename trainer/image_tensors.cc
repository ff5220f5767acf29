#include "trainer/image_tensors.h"

#include <algorithm>

namespace trainer {

Split toTensors(const ImageSet& s, int64_t limit, torch::ScalarType type) {
  int64_t n = limit > 0 ? std::min(limit, s.count) : s.count;
  auto* pixels = const_cast<uint8_t*>(s.pixels.data());
  auto* labels = const_cast<uint8_t*>(s.labels.data());
  Split out;
  out.images = torch::from_blob(pixels, {n, 1, s.rows, s.cols}, torch::kUInt8)
                   .to(type)
                   .div_(255.0)
                   .sub_(kPixelMean)
                   .div_(kPixelStd);
  out.labels = torch::from_blob(labels, {n}, torch::kUInt8).to(torch::kLong);
  return out;
}

}  // namespace trainer
