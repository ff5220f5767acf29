// peers.h — which path a communicator's device buffers take, decided once per (wrapped
// stream, communicator) from what every rank reports, identically on every rank.
//
// Each rank sends one PeerHeader through the communicator's host all-gather: its
// CHORUS_CUDA_PATH, whether all ranks are on its host, its process, its GPU and the GPUs it
// can reach, and its device scratch area (raw address and IPC handle). decidePath() is a
// pure function of the gathered headers, so every rank reaches the same verdict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/cuda/runtime.h"

namespace chorus {
namespace cuda {

enum class PathMode : int32_t { Auto = 0, Staging = 1, Device = 2 };
/// CHORUS_CUDA_PATH ("auto", "staging", "device"); false with a message for anything else.
bool parsePathMode(const std::string& s, PathMode* out, std::string* err);

struct PeerHeader {
  uint32_t magic = 0x43445048;  // "CDPH"
  int32_t mode = 0;             // PathMode
  int32_t oneHost = 0;          // every rank of the communicator is on this rank's host
  int32_t device = -1;          // this rank's GPU
  uint64_t process = 0;         // identifies the process (pid and an ASLR'd address)
  uint64_t accessMask = 0;      // bit d: this rank's GPU reaches GPU d (d < 64)
  int32_t scratchOk = 0;        // scratch allocated and its IPC handle taken
  int32_t pad = 0;
  uint64_t scratch = 0;  // the scratch area's address in this process
  IpcHandle handle;      // and its IPC handle, for ranks of other processes
};

enum class Verdict {
  Device,    // every rank takes the device path for eligible calls
  Staging,   // every rank stages through the host
  Mismatch,  // ranks asked for different paths (staging vs device): every call fails
  NoDevice,  // CHORUS_CUDA_PATH=device where the device path cannot run: every call fails
};

/// The verdict for these headers (one per rank, in rank order); `why` says why it is not
/// Device. Pure: the same headers give the same verdict on every rank.
Verdict decidePath(const std::vector<PeerHeader>& h, std::string* why);

/// A value identifying this process among the ranks of one host.
uint64_t processToken();

}  // namespace cuda
}  // namespace chorus
