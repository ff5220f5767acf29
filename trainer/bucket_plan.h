// bucket_plan.h — how gradients are grouped into all-reduce buckets.
//
// Gradients become ready roughly in reverse order of the parameters' registration (the
// last layer first), so buckets are filled in that order: the first bucket can be reduced
// while backward is still working on earlier layers. As in PyTorch's DDP, the first
// bucket has its own, smaller cap so that communication starts early.
#pragma once

#include <cstddef>
#include <vector>

namespace trainer {

/// Splits tensors of `bytes[i]` (given in expected ready order) into consecutive buckets:
/// a bucket is closed once it holds at least its cap (firstCap for the first, cap after).
/// Returns, for each bucket, the positions (into `bytes`) it holds. Every position appears
/// exactly once; a tensor larger than the cap gets a bucket of its own.
std::vector<std::vector<size_t>> planBuckets(const std::vector<size_t>& bytes, size_t firstCap,
                                             size_t cap);

}  // namespace trainer
