// ps_sparse.h — the sparse model of parameter-server mode (--model hashed).
//
// Every pixel position p (0..783) with intensity level l = pixel / 64 (0..3) is one
// feature, hashed into --hash-buckets rows of an embedding table (dim 32). An image is the
// sum of its 784 feature rows, then 32-64-10 with ReLU. A batch touches at most 3136 of
// the table's rows, so a worker pushes gradients and pulls values only for those rows
// (ps_train.cc), not for the whole table.
#pragma once

#include <torch/torch.h>

namespace trainer {

constexpr int64_t kHashedDim = 32;

/// Parameters: "0.weight" [buckets, 32] (the table), then the head (1.*, 3.*).
torch::nn::Sequential makeHashedModel(int64_t buckets);

/// The table rows of each image: [n, 784] int64, from normalized images [n,1,28,28].
torch::Tensor hashedKeys(const torch::Tensor& images, int64_t buckets);

/// Logits from the rows `rows` [m, 32] of the table, where `inverse` [n*784] indexes
/// `rows` for each image's features (training: rows = the touched rows as a leaf).
torch::Tensor hashedForward(torch::nn::Sequential& model, const torch::Tensor& rows,
                            const torch::Tensor& inverse, int64_t n);

/// Logits of `images` with the whole local table (evaluation), in chunks.
torch::Tensor hashedLogits(torch::nn::Sequential& model, const torch::Tensor& images,
                           int64_t buckets);

}  // namespace trainer
