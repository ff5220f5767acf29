// module.cc — the Python module chorus_torch. Importing it registers the "chorus" backend
// with torch.distributed, so `init_process_group(backend="chorus")` works.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "python/csrc/process_group.h"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> createProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<chorus_torch::ProcessGroupChorus>(store, rank, size, timeout);
}

}  // namespace

PYBIND11_MODULE(chorus_torch, m) {
  m.doc() = "Chorus as a torch.distributed backend: import chorus_torch, then "
            "init_process_group(backend='chorus')";
  // The base classes (ProcessGroup, Store) must be known to pybind11 first.
  py::module::import("torch.distributed");
  py::class_<chorus_torch::ProcessGroupChorus, c10d::ProcessGroup,
             c10::intrusive_ptr<chorus_torch::ProcessGroupChorus>>(m, "ProcessGroupChorus");
  m.def("create_process_group", &createProcessGroup, py::arg("store"), py::arg("rank"),
        py::arg("world_size"), py::arg("timeout"),
        py::call_guard<py::gil_scoped_release>(),
        "The creator torch.distributed calls for backend='chorus' (rendezvous through store)");
  int version = 0;
  chorusGetVersion(&version);
  m.attr("chorus_version") = version;
  py::object backend = py::module::import("torch.distributed").attr("Backend");
  if (!py::hasattr(backend, "CHORUS"))
    backend.attr("register_backend")("chorus", m.attr("create_process_group"));
}
