#include "trainer/bucket_plan.h"

namespace trainer {

std::vector<std::vector<size_t>> planBuckets(const std::vector<size_t>& bytes, size_t firstCap,
                                             size_t cap) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> current;
  size_t filled = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    current.push_back(i);
    filled += bytes[i];
    size_t limit = buckets.empty() ? firstCap : cap;
    if (filled >= limit) {
      buckets.push_back(std::move(current));
      current.clear();
      filled = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace trainer
