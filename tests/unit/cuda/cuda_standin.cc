// cuda_standin.cc — the TEST STAND-IN for the CUDA runtime (see cuda_standin.h).
#include "tests/unit/cuda/cuda_standin.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <vector>

#include "kernels/coll_body.h"

namespace standin {

struct CudaStandin::Stream {
  std::mutex mutex;
  std::condition_variable work, idle;
  std::deque<std::function<void()>> queue;
  bool busy = false, stop = false;
  int extraDelayUs = 0;       // setPerStreamDelayUs
  bool failLaunches = false;  // setFailLaunchesOnStream
  std::thread thread;
};

struct CudaStandin::Event {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t recorded = 0, completed = 0;
};

CudaStandin::CudaStandin(size_t deviceBytes) : size_(deviceBytes) {
  void* r = mmap(nullptr, size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  // The backing is a memory file, so another process can map an allocation of it (the
  // stand-in's CUDA IPC: ipcOpenHandle).
  memfd_ = memfd_create("chorus-cuda-standin", MFD_CLOEXEC);
  if (memfd_ < 0 || ftruncate(memfd_, static_cast<off_t>(size_)) != 0) {
    std::fprintf(stderr, "stand-in: no memory file of %zu bytes\n", size_);
    std::abort();
  }
  void* b = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd_, 0);
  if (r == MAP_FAILED || b == MAP_FAILED) {
    std::fprintf(stderr, "stand-in: cannot reserve %zu bytes\n", size_);
    std::abort();
  }
  reserved_ = static_cast<unsigned char*>(r);
  backing_ = static_cast<unsigned char*>(b);
}

CudaStandin::~CudaStandin() {
  std::set<Stream*> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left = streams_;
  }
  for (Stream* s : left) destroyStream(s);
  for (auto& p : pinned_) std::free(reinterpret_cast<void*>(p.first));
  munmap(reserved_, size_);
  munmap(backing_, size_);
  close(memfd_);
}

void* CudaStandin::deviceAlloc(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Page-aligned, so an allocation can be mapped into another process (IPC).
  const size_t at = (next_ + 4095) & ~size_t{4095};
  if (at + bytes > size_) return nullptr;
  next_ = at + (bytes ? bytes : 1);
  allocs_[reinterpret_cast<uintptr_t>(reserved_ + at)] = bytes;
  return reserved_ + at;
}

void* CudaStandin::hostView(const void* devPtr) const {
  unsigned char* out = nullptr;
  return translate(devPtr, 1, &out) ? out : nullptr;
}

bool CudaStandin::translate(const void* p, size_t bytes, unsigned char** out) const {
  const auto a = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(reserved_);
  if (a < lo || a >= lo + size_) {
    *out = reinterpret_cast<unsigned char*>(const_cast<void*>(p));
    return true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocs_.upper_bound(a);
  if (it == allocs_.begin()) return false;
  --it;
  if (a + bytes > it->first + it->second) return false;  // leaves the allocation
  *out = backing_ + (a - lo);
  return true;
}

void* CudaStandin::createStream() {
  auto* s = new Stream();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s->failLaunches = streamsCreated_ == failStream_.load();
    s->extraDelayUs = (streamsCreated_++ % 4) * perStreamDelayUs_.load();
  }
  s->thread = std::thread([this, s] {
    std::unique_lock<std::mutex> lock(s->mutex);
    for (;;) {
      s->work.wait(lock, [s] { return s->stop || !s->queue.empty(); });
      if (s->queue.empty()) return;
      auto fn = std::move(s->queue.front());
      s->queue.pop_front();
      s->busy = true;
      lock.unlock();
      if (int d = delayUs_.load() + s->extraDelayUs)
        std::this_thread::sleep_for(std::chrono::microseconds(d));
      fn();
      lock.lock();
      s->busy = false;
      if (s->queue.empty()) s->idle.notify_all();
    }
  });
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.insert(s);
  return s;
}

void CudaStandin::destroyStream(void* stream) {
  Stream* s = findStream(stream);
  if (!s) return;
  {
    std::lock_guard<std::mutex> lock(s->mutex);
    s->stop = true;
    s->work.notify_all();
  }
  s->thread.join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.erase(s);
  }
  delete s;
}

CudaStandin::Stream* CudaStandin::findStream(void* p) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto* s = static_cast<Stream*>(p);
  return streams_.count(s) ? s : nullptr;
}

void CudaStandin::push(Stream* s, std::function<void()> fn) const {
  std::lock_guard<std::mutex> lock(s->mutex);
  s->queue.push_back(std::move(fn));
  s->work.notify_one();
}

void CudaStandin::enqueue(void* stream, std::function<void()> fn) {
  if (Stream* s = findStream(stream)) push(s, std::move(fn));
}

bool CudaStandin::usable(std::string* why) const {
  if (!noGpu_) return true;
  if (why) *why = "stand-in: no CUDA-capable device is detected";
  return false;
}

bool CudaStandin::classify(const void* p, chorus::cuda::PtrInfo* out, std::string* err) const {
  if (noGpu_) {
    if (err) *err = "stand-in cudaPointerGetAttributes: no CUDA-capable device is detected";
    return false;
  }
  const auto a = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(reserved_);
  std::lock_guard<std::mutex> lock(mutex_);
  *out = chorus::cuda::PtrInfo{};
  if (a >= lo && a < lo + size_) {
    auto it = allocs_.upper_bound(a);
    if (it != allocs_.begin() && a < std::prev(it)->first + std::prev(it)->second)
      *out = chorus::cuda::PtrInfo{chorus::cuda::MemKind::Device, 0};
    return true;  // an unallocated device address: "unregistered", like cudart says
  }
  auto it = pinned_.upper_bound(a);
  if (it != pinned_.begin() && a < std::prev(it)->first + std::prev(it)->second)
    *out = chorus::cuda::PtrInfo{chorus::cuda::MemKind::PinnedHost, -1};
  return true;
}

bool CudaStandin::streamDevice(void* stream, int* device, std::string* err) const {
  if (!findStream(stream)) {
    if (err) *err = "stand-in cudaStreamQuery: invalid resource handle";
    return false;
  }
  *device = 0;
  return true;
}

bool CudaStandin::getDevice(int* device, std::string*) const {
  *device = 0;
  return true;
}

bool CudaStandin::setDevice(int device, std::string* err) const {
  if (device == 0) return true;
  if (err) *err = "stand-in cudaSetDevice: invalid device ordinal";
  return false;
}

bool CudaStandin::hostAllocMapped(size_t bytes, void** hostPtr, void** devPtr,
                                  std::string* err) const {
  void* p = std::aligned_alloc(4096, (bytes + 4095) & ~size_t{4095});
  if (!p) {
    if (err) *err = "stand-in cudaHostAlloc: out of memory";
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  pinned_[reinterpret_cast<uintptr_t>(p)] = bytes;
  ++hostAllocs_;
  *hostPtr = *devPtr = p;  // unified addressing: the same address on both sides
  return true;
}

void CudaStandin::hostFree(void* hostPtr) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pinned_.erase(reinterpret_cast<uintptr_t>(hostPtr))) std::free(hostPtr);
}

bool CudaStandin::memcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                size_t width, size_t height, void* stream, std::string* err) const {
  Stream* s = findStream(stream);
  unsigned char *d = nullptr, *sr = nullptr;
  const size_t dspan = height ? (height - 1) * dpitch + width : 0;
  const size_t sspan = height ? (height - 1) * spitch + width : 0;
  if (!s || dpitch < width || spitch < width || !translate(dst, dspan, &d) ||
      !translate(src, sspan, &sr)) {
    if (err) *err = "stand-in cudaMemcpy2DAsync: invalid argument";
    return false;
  }
  const auto lo = reinterpret_cast<uintptr_t>(reserved_);
  auto inDevice = [&](const void* p) {
    return reinterpret_cast<uintptr_t>(p) >= lo && reinterpret_cast<uintptr_t>(p) < lo + size_;
  };
  if (!inDevice(dst) && !inDevice(src)) {
    // cudart performs host-to-host "async" copies synchronously, outside stream order; a
    // caller relying on stream order for them would be wrong on a GPU, so refuse them.
    if (err) *err = "stand-in cudaMemcpy2DAsync: host-to-host copies ignore stream order";
    return false;
  }
  ++copies_;
  if (!inDevice(dst) || !inDevice(src)) ++hostCopies_;
  push(s, [=] {
    for (size_t r = 0; r < height; ++r) std::memcpy(d + r * dpitch, sr + r * spitch, width);
  });
  return true;
}

bool CudaStandin::eventCreate(void** ev, std::string*) const {
  *ev = new Event();
  return true;
}

void CudaStandin::eventDestroy(void* ev) const { delete static_cast<Event*>(ev); }

bool CudaStandin::eventRecord(void* ev, void* stream, std::string* err) const {
  Stream* s = findStream(stream);
  if (!s) {
    if (err) *err = "stand-in cudaEventRecord: invalid resource handle";
    return false;
  }
  auto* e = static_cast<Event*>(ev);
  uint64_t gen;
  {
    std::lock_guard<std::mutex> lock(e->mutex);
    gen = ++e->recorded;
  }
  ++records_;
  push(s, [e, gen] {
    std::lock_guard<std::mutex> lock(e->mutex);
    if (gen > e->completed) e->completed = gen;
    e->cv.notify_all();
  });
  return true;
}

bool CudaStandin::eventSynchronize(void* ev, std::string*) const {
  auto* e = static_cast<Event*>(ev);
  std::unique_lock<std::mutex> lock(e->mutex);
  const uint64_t want = e->recorded;  // the most recent record, as cudaEventSynchronize
  e->cv.wait(lock, [&] { return e->completed >= want; });
  return true;
}

bool CudaStandin::waitFlag(const volatile uint64_t* flagDev, uint64_t target, void* stream,
                           std::string* err) const {
  Stream* s = findStream(stream);
  if (!s) {
    if (err) *err = "stand-in kernel launch: invalid resource handle";
    return false;
  }
  ++waits_;
  auto* flag = const_cast<uint64_t*>(flagDev);
  push(s, [flag, target] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < target) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "stand-in: wait kernel for ticket %llu gave up after 120 s\n",
                     static_cast<unsigned long long>(target));
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  return true;
}

bool CudaStandin::streamSynchronize(void* stream, std::string* err) const {
  Stream* s = findStream(stream);
  if (!s) {
    if (err) *err = "stand-in cudaStreamSynchronize: invalid resource handle";
    return false;
  }
  std::unique_lock<std::mutex> lock(s->mutex);
  s->idle.wait(lock, [s] { return s->queue.empty() && !s->busy; });
  return true;
}

// --- the same-host device path -------------------------------------------------------

bool CudaStandin::deviceMalloc(size_t bytes, void** dev, std::string* err) const {
  *dev = const_cast<CudaStandin*>(this)->deviceAlloc(bytes);
  if (*dev) return true;
  if (err) *err = "stand-in cudaMalloc: out of memory";
  return false;
}

void CudaStandin::deviceFree(void* dev) const {
  // Forgotten, not reused: a later access through a stale pointer is "unregistered".
  std::lock_guard<std::mutex> lock(mutex_);
  const_cast<CudaStandin*>(this)->allocs_.erase(reinterpret_cast<uintptr_t>(dev));
}

// A handle names the process and stand-in (the "driver context"), the memory file and the
// allocation. Another process maps that part of the file into its own device range.
struct StandinHandle {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  const CudaStandin* owner;
  uint64_t offset, bytes;
};
constexpr uint32_t kHandleMagic = 0x5354444eu;

bool CudaStandin::ipcGetHandle(void* dev, chorus::cuda::IpcHandle* out, std::string* err) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocs_.find(reinterpret_cast<uintptr_t>(dev));
  if (it == allocs_.end()) {
    if (err) *err = "stand-in cudaIpcGetMemHandle: invalid argument (not an allocation's start)";
    return false;
  }
  *out = chorus::cuda::IpcHandle{};
  const StandinHandle h{kHandleMagic,
                        static_cast<int32_t>(getpid()),
                        memfd_,
                        this,
                        static_cast<uint64_t>(it->first - reinterpret_cast<uintptr_t>(reserved_)),
                        static_cast<uint64_t>(it->second)};
  static_assert(sizeof h <= sizeof out->bytes, "handle size");
  std::memcpy(out->bytes, &h, sizeof h);
  return true;
}

bool CudaStandin::ipcOpenHandle(const chorus::cuda::IpcHandle& in, void** dev,
                                std::string* err) const {
  StandinHandle h;
  std::memcpy(&h, in.bytes, sizeof h);
  if (h.magic != kHandleMagic || h.pid == getpid()) {
    // cudaIpcOpenMemHandle refuses handles of its own process, and garbage.
    if (err) *err = "stand-in cudaIpcOpenMemHandle: invalid device context";
    return false;
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", h.pid, h.fd);
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    if (err) *err = std::string("stand-in cudaIpcOpenMemHandle: ") + path + ": " + strerror(errno);
    return false;
  }
  void* local = const_cast<CudaStandin*>(this)->deviceAlloc(h.bytes);
  void* m = local ? mmap(backing_ + (static_cast<unsigned char*>(local) - reserved_), h.bytes,
                         PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, h.offset)
                  : MAP_FAILED;
  close(fd);
  if (m == MAP_FAILED) {
    if (err) *err = "stand-in cudaIpcOpenMemHandle: out of device address space";
    return false;
  }
  *dev = local;
  return true;
}

bool CudaStandin::canAccessPeer(int, int, bool* can, std::string*) const {
  *can = !noPeerAccess_;
  return true;
}

bool CudaStandin::streamCreate(void** stream, std::string*) const {
  *stream = const_cast<CudaStandin*>(this)->createStream();
  return true;
}

void CudaStandin::streamDestroy(void* stream) const {
  const_cast<CudaStandin*>(this)->destroyStream(stream);
}

// Kernel launches run the device bodies (kernels/coll_body.h) on the stream's thread over
// a grid of 96 threads (fewer than most counts, so threads loop), every pointer translated
// to the stand-in's backing first; a pointer outside device memory is a launch failure
// (a GPU would fault).
bool CudaStandin::launchReduce(const chorus::kernels::ReduceArgs& a, void* stream,
                               std::string* err) const {
  Stream* s = findStream(stream);
  const size_t bytes = a.count * chorus::kernels::typeBytes(a.spec.type);
  chorus::kernels::ReduceArgs h = a;
  unsigned char* p = nullptr;
  if (s && s->failLaunches) {
    if (err) *err = "stand-in reduce kernel: launch failure (injected)";
    return false;
  }
  bool ok = s != nullptr && a.nsrc >= 1 && a.nsrc <= chorus::kernels::kMaxSources;
  auto dev = [&](const void* ptr) {
    const auto x = reinterpret_cast<uintptr_t>(ptr), lo = reinterpret_cast<uintptr_t>(reserved_);
    return x >= lo && x < lo + size_;
  };
  ok = ok && (bytes == 0 || (dev(a.dst) && translate(a.dst, bytes, &p)));
  h.dst = p;
  for (int j = 0; ok && j < a.nsrc; ++j) {
    ok = bytes == 0 || (dev(a.src[j]) && translate(a.src[j], bytes, &p));
    h.src[j] = p;
  }
  if (!ok) {
    if (err) *err = "stand-in reduce kernel: invalid argument (a pointer outside device memory)";
    return false;
  }
  ++reduceLaunches_;
  push(s, [h] { chorus::kernels::runReduceOnHost(h, 96); });
  return true;
}

bool CudaStandin::launchCopy(const chorus::kernels::CopyArgs& a, void* stream,
                             std::string* err) const {
  Stream* s = findStream(stream);
  chorus::kernels::CopyArgs h = a;
  if (s && s->failLaunches) {
    if (err) *err = "stand-in copy kernel: launch failure (injected)";
    return false;
  }
  bool ok = s != nullptr && a.n >= 0 && a.n <= chorus::kernels::kMaxSources;
  auto dev = [&](const void* ptr) {
    const auto x = reinterpret_cast<uintptr_t>(ptr), lo = reinterpret_cast<uintptr_t>(reserved_);
    return x >= lo && x < lo + size_;
  };
  for (int j = 0; ok && j < a.n && a.bytes > 0; ++j) {
    unsigned char *d = nullptr, *sr = nullptr;
    ok = dev(a.dst[j]) && dev(a.src[j]) && translate(a.dst[j], a.bytes, &d) &&
         translate(a.src[j], a.bytes, &sr);
    h.dst[j] = d;
    h.src[j] = sr;
  }
  if (!ok) {
    if (err) *err = "stand-in copy kernel: invalid argument (a pointer outside device memory)";
    return false;
  }
  ++copyLaunches_;
  push(s, [h] { chorus::kernels::runCopyOnHost(h, 96); });
  return true;
}

}  // namespace standin
