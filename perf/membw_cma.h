// membw_cma.h — chorus_membw --cma (membw_cma.cc).
#pragma once

#include <stddef.h>

#include <vector>

/// Prints memcpy against process_vm_readv of another process's buffer, with 4 KiB pages and
/// with transparent huge pages, for each size (default 64 KiB .. 64 MiB). Returns the exit code.
int cmaMain(std::vector<size_t> sizes);
