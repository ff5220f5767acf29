// The process-group operations only PyTorch 2.x has (built only into the 2.x module,
// python/torch2/meson.build): endCoalescing returning one Work, and the coalesced forms of
// all_gather_into_tensor / reduce_scatter_tensor that _coalescing_manager issues.
#include <ATen/ATen.h>

#include "python/csrc/process_group.h"

#if CHORUS_TORCH2

namespace chorus_torch {

// Every Work of the batch is on the stream before this one, and the completion queue
// completes Works in order (a failure is sticky), so this Work completes after all of them.
c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::endCoalescing() {
  finishCoalescing();
  return launch(c10d::OpType::COALESCED, "coalesced", {c10d::kUnsetTimeout, false}, {},
                [](chorusStream_t) { return chorusSuccess; }, nullptr, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "chorus allgather_into_tensor_coalesced: ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) _allgather_base(outputs[i], inputs[i], opts);
  return launch(c10d::OpType::COALESCED, "allgather_into_tensor_coalesced", modeOf(opts), outputs,
                [](chorusStream_t) { return chorusSuccess; }, nullptr, {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(),
              "chorus reduce_scatter_tensor_coalesced: ", outputs.size(), " outputs for ",
              inputs.size(), " inputs");
  for (size_t i = 0; i < inputs.size(); ++i) _reduce_scatter_base(outputs[i], inputs[i], opts);
  return launch(c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced", modeOf(opts), outputs,
                [](chorusStream_t) { return chorusSuccess; }, nullptr, {});
}

}  // namespace chorus_torch

#endif  // CHORUS_TORCH2
