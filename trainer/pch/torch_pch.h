// torch_pch.h — libtorch's C++ frontend, which every torch translation unit of chorus-train
// includes, compiled once as a precompiled header (meson's cpp_pch): parsing torch/torch.h
// is most of each file's compile time (about 24 s per file without it on our 2-core machine).
// No include guard: a precompiled header is the main file of its own compilation.
#include <torch/torch.h>
