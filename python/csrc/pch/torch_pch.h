// torch_pch.h — the PyTorch and pybind11 headers the translation units of chorus_torch
// parse, compiled once as a precompiled header (meson's cpp_pch): parsing them is most of
// each file's compile time (about 25 s per file without it on our 2-core machine).
// No include guard: a precompiled header is the main file of its own compilation.
#include <ATen/ATen.h>
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/utils/pybind.h>
