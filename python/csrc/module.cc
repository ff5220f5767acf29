// module.cc — the Python module chorus_torch. Importing it registers the "chorus" backend
// with torch.distributed, so `init_process_group(backend="chorus")` works.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "python/csrc/process_group.h"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<chorus_torch::ProcessGroupChorus> createProcessGroup(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout) {
  return c10::make_intrusive<chorus_torch::ProcessGroupChorus>(store, rank, size, timeout);
}

#if CHORUS_TORCH2
// pg_options of init_process_group/new_group: {"reproducible": bool} or an object with a
// `reproducible` attribute; 1 or 0, or CHORUS_CONFIG_UNDEF_INT where it says nothing.
int reproducibleOption(const py::object& options) {
  py::object v = py::none();
  if (py::isinstance<py::dict>(options)) {
    for (auto item : options.cast<py::dict>()) {
      const std::string key = py::str(item.first);
      if (key != "reproducible")
        throw py::value_error("chorus: pg_options has no key '" + key +
                              "' (the backend takes: reproducible)");
      v = py::reinterpret_borrow<py::object>(item.second);
    }
  } else if (!options.is_none() && py::hasattr(options, "reproducible")) {
    v = options.attr("reproducible");
  }
  if (v.is_none()) return CHORUS_CONFIG_UNDEF_INT;
  if (!py::isinstance<py::bool_>(v) && !py::isinstance<py::int_>(v))
    throw py::type_error("chorus: pg_options reproducible must be a bool");
  return v.cast<bool>() ? 1 : 0;
}
#endif

}  // namespace

PYBIND11_MODULE(chorus_torch, m) {
  m.doc() =
      "Chorus as a torch.distributed backend: import chorus_torch, then "
      "init_process_group(backend='chorus')";
  // The base classes (ProcessGroup or Backend, Store) must be known to pybind11 first.
  py::module::import("torch.distributed");
  py::class_<chorus_torch::ProcessGroupChorus, chorus_torch::BackendBase,
             c10::intrusive_ptr<chorus_torch::ProcessGroupChorus>>(m, "ProcessGroupChorus");
  m.def("create_process_group", &createProcessGroup, py::arg("store"), py::arg("rank"),
        py::arg("world_size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Makes the chorus backend of one group (collective: rendezvous through store)");
  int version = 0;
  chorusGetVersion(&version);
  m.attr("chorus_version") = version;
  m.attr("torch_api") = CHORUS_TORCH2 ? 2 : 1;
  py::object backend = py::module::import("torch.distributed").attr("Backend");
  if (py::hasattr(backend, "CHORUS")) return;
#if CHORUS_TORCH2
  // The extended API hands over the group's options (store, rank, size, timeout from
  // init_process_group/new_group); the backend serves CPU tensors only.
  m.def(
      "_create_backend",
      [](py::object opts, py::object pgOptions) {
        auto store = opts.attr("store").cast<c10::intrusive_ptr<c10d::Store>>();
        const int rank = opts.attr("group_rank").cast<int>();
        const int size = opts.attr("group_size").cast<int>();
        const auto timeout = opts.attr("timeout").cast<std::chrono::milliseconds>();
        const int reproducible = reproducibleOption(pgOptions);
        py::gil_scoped_release noGil;
        return c10::make_intrusive<chorus_torch::ProcessGroupChorus>(store, rank, size, timeout,
                                                                     reproducible);
      },
      "The creator torch.distributed calls for backend='chorus' (extended API)");
  py::list devices;
  devices.append("cpu");
  backend.attr("register_backend")("chorus", m.attr("_create_backend"),
                                   py::arg("extended_api") = true, py::arg("devices") = devices);
#else
  backend.attr("register_backend")("chorus", m.attr("create_process_group"));
#endif
}
