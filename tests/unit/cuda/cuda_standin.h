// cuda_standin.h — a TEST STAND-IN for the CUDA runtime (no GPU exists on our machines).
//
// It implements chorus::cuda::Runtime on the host so the device data path runs here:
// - "device memory" is handed out from an address range reserved PROT_NONE, like the
//   unified address space a GPU's memory lives in: the host cannot touch it (the host
//   pointer checks refuse it, and any stray host access crashes the test), while the
//   stand-in's copies reach it through a separate backing mapping;
// - pinned mapped host memory is plain host memory the stand-in remembers;
// - each stream is an in-order queue run by its own thread (asynchronous, like a GPU), and
//   an optional delay before every operation makes a missing wait show up as wrong data;
// - events complete when their stream reaches them; the wait kernel polls the flag word.
// It never pretends to be a GPU anywhere else: only tests construct it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "src/cuda/runtime.h"

namespace standin {

class CudaStandin final : public chorus::cuda::Runtime {
 public:
  explicit CudaStandin(size_t deviceBytes = size_t{256} << 20);
  ~CudaStandin() override;

  // --- test controls -----------------------------------------------------------------
  /// Device memory (a pointer the host cannot dereference). 256-byte aligned.
  void* deviceAlloc(size_t bytes);
  /// The host view of device memory, for tests only: to fill and read buffers directly
  /// when no stream order is involved.
  void* hostView(const void* devPtr) const;
  void* createStream();
  void destroyStream(void* stream);
  /// "A user kernel": runs fn on the stream's thread, in stream order.
  void enqueue(void* stream, std::function<void()> fn);
  /// Delay before each stream operation, in microseconds (0: none).
  void setOpDelayUs(int us) { delayUs_ = us; }
  /// Behave like a process without a GPU (usable() false, classify() fails).
  void setNoGpu(bool v) { noGpu_ = v; }
  /// Extra delay before every operation of the n-th stream created (n counted from 0):
  /// (n % 4) * us microseconds, so ranks' streams run at different speeds and a missing
  /// wait between ranks gives wrong data.
  void setPerStreamDelayUs(int us) { perStreamDelayUs_ = us; }
  /// Behave like GPUs without peer access: canAccessPeer says no, even for one device.
  void setNoPeerAccess(bool v) { noPeerAccess_ = v; }
  /// Kernel launches on the n-th stream created (from 0) fail, as a launch error would.
  void setFailLaunchesOnStream(int n) { failStream_ = n; }
  /// Device-path kernels launched so far (reduce, copy).
  uint64_t reduceLaunches() const { return reduceLaunches_; }
  uint64_t copyLaunches() const { return copyLaunches_; }
  /// Counters, for checking the schedule.
  uint64_t copies() const { return copies_; }
  /// Copies with host memory on either side (staging); the device path makes none.
  uint64_t hostCopies() const { return hostCopies_; }
  uint64_t waits() const { return waits_; }
  uint64_t records() const { return records_; }
  uint64_t hostAllocs() const { return hostAllocs_; }

  // --- chorus::cuda::Runtime ---------------------------------------------------------
  const char* name() const override { return "stand-in"; }
  bool usable(std::string* why) const override;
  bool classify(const void* p, chorus::cuda::PtrInfo* out, std::string* err) const override;
  bool streamDevice(void* stream, int* device, std::string* err) const override;
  bool getDevice(int* device, std::string* err) const override;
  bool setDevice(int device, std::string* err) const override;
  bool hostAllocMapped(size_t bytes, void** hostPtr, void** devPtr,
                       std::string* err) const override;
  void hostFree(void* hostPtr) const override;
  bool memcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                     size_t height, void* stream, std::string* err) const override;
  bool eventCreate(void** ev, std::string* err) const override;
  void eventDestroy(void* ev) const override;
  bool eventRecord(void* ev, void* stream, std::string* err) const override;
  bool eventSynchronize(void* ev, std::string* err) const override;
  bool waitFlag(const volatile uint64_t* flagDev, uint64_t target, void* stream,
                std::string* err) const override;
  bool streamSynchronize(void* stream, std::string* err) const override;
  bool deviceMalloc(size_t bytes, void** dev, std::string* err) const override;
  void deviceFree(void* dev) const override;
  bool ipcGetHandle(void* dev, chorus::cuda::IpcHandle* out, std::string* err) const override;
  bool ipcOpenHandle(const chorus::cuda::IpcHandle& h, void** dev, std::string* err) const override;
  void ipcCloseHandle(void*) const override {}
  bool canAccessPeer(int device, int peerDevice, bool* can, std::string* err) const override;
  bool deviceCount(int* n, std::string*) const override {
    *n = 1;
    return true;
  }
  bool streamCreate(void** stream, std::string* err) const override;
  void streamDestroy(void* stream) const override;
  bool launchReduce(const chorus::kernels::ReduceArgs& a, void* stream,
                    std::string* err) const override;
  bool launchCopy(const chorus::kernels::CopyArgs& a, void* stream,
                  std::string* err) const override;

 private:
  struct Stream;
  struct Event;
  Stream* findStream(void* s) const;
  // Translates a device address to its backing; host addresses are returned as they are.
  // false when a range straddles or leaves an allocation.
  bool translate(const void* p, size_t bytes, unsigned char** out) const;
  void push(Stream* s, std::function<void()> fn) const;

  unsigned char* reserved_ = nullptr;  // PROT_NONE: the "device" addresses
  unsigned char* backing_ = nullptr;   // read/write: where device data really lives
  int memfd_ = -1;                     // the backing's memory file (for IPC)
  size_t size_ = 0;
  mutable std::mutex mutex_;
  size_t next_ = 0;
  std::map<uintptr_t, size_t> allocs_;          // device allocations: start -> bytes
  mutable std::map<uintptr_t, size_t> pinned_;  // hostAllocMapped blocks: start -> bytes
  std::set<Stream*> streams_;
  std::atomic<int> delayUs_{0};
  std::atomic<int> perStreamDelayUs_{0};
  std::atomic<int> failStream_{-1};
  std::atomic<bool> noPeerAccess_{false};
  int streamsCreated_ = 0;  // under mutex_
  mutable std::atomic<uint64_t> reduceLaunches_{0}, copyLaunches_{0}, hostCopies_{0};
  std::atomic<bool> noGpu_{false};
  mutable std::atomic<uint64_t> copies_{0}, waits_{0}, records_{0}, hostAllocs_{0};
};

}  // namespace standin
