// perf/gloo/gloo_backend.cc — Backend implemented with Gloo's collectives (see the header).
#include "perf/gloo/gloo_backend.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/gather.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/scatter.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

namespace perf {
namespace {

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<T>{}) with the C++ type Gloo uses for t; -1 where Gloo has no such type.
template <typename F>
int withType(DataType t, F&& f) {
  switch (t) {
    case kInt8: return f(Tag<int8_t>{});
    case kUint8: return f(Tag<uint8_t>{});
    case kInt32: return f(Tag<int32_t>{});
    case kUint32: return f(Tag<uint32_t>{});
    case kInt64: return f(Tag<int64_t>{});
    case kUint64: return f(Tag<uint64_t>{});
    case kHalf: return f(Tag<gloo::float16>{});
    case kFloat: return f(Tag<float>{});
    case kDouble: return f(Tag<double>{});
    default: return -1;
  }
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Gloo's own element-wise reductions (gloo/math.h); avg reduces with sum.
template <typename T>
ReduceFn reduceFn(RedOp op) {
  switch (op) {
    case kProd: return static_cast<ReduceFn>(&gloo::product<T>);
    case kMax: return static_cast<ReduceFn>(&gloo::max<T>);
    case kMin: return static_cast<ReduceFn>(&gloo::min<T>);
    default: return static_cast<ReduceFn>(&gloo::sum<T>);
  }
}

// The same for the algorithm classes (reduce-scatter).
template <typename T>
const gloo::ReductionFunction<T>* reductionFunction(RedOp op) {
  switch (op) {
    case kProd: return gloo::ReductionFunction<T>::product;
    case kMax: return gloo::ReductionFunction<T>::max;
    case kMin: return gloo::ReductionFunction<T>::min;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

// avg = sum, then a division on the host (integer types truncate, like the reference).
template <typename T>
void divideBy(void* buf, size_t count, int n) {
  T* p = static_cast<T*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(n));
}
template <>
void divideBy<gloo::float16>(void* buf, size_t count, int n) {
  gloo::float16* p = static_cast<gloo::float16*>(buf);
  for (size_t i = 0; i < count; ++i)
    p[i] = gloo::cpu_float2half_rn(gloo::cpu_half2float(p[i]) / static_cast<float>(n));
}

const char* envOr(const char* name, const char* dflt) {
  const char* v = getenv(name);
  return (v && *v) ? v : dflt;
}

// Letters, digits, '-', '_' and '.' only: the value becomes part of a path.
std::string pathSafe(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
    out += ok ? c : '_';
  }
  return out;
}

// Removes the files of a store directory, then the directory (no subdirectories there).
void removeStoreDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d) {
    while (struct dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      unlink((dir + "/" + e->d_name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

constexpr uint8_t kSendRecvSlotPrefix = 0x7e;  // not one of Gloo's collective prefixes

class GlooBackend : public Backend {
 public:
  ~GlooBackend() override {
    rsAlgo_.reset();
    context_.reset();
  }

  int init(int*, char***) override {
    const char* r = getenv("CHORUS_RANK");
    const char* n = getenv("CHORUS_WORLD_SIZE");
    if (!(r && *r && n && *n)) {
      r = getenv("OMPI_COMM_WORLD_RANK");
      n = getenv("OMPI_COMM_WORLD_SIZE");
    }
    const bool launched = r && *r && n && *n;
    if (launched) {
      rank_ = atoi(r);
      nranks_ = atoi(n);
      if (nranks_ < 1 || rank_ < 0 || rank_ >= nranks_) {
        error_ = std::string("bad rank ") + r + " of " + n;
        return 1;
      }
    }

    // The rendezvous directory: explicit, or derived from the launcher's job identity.
    const char* explicitDir = getenv("CHORUS_GLOO_STORE");
    if (explicitDir && *explicitDir) {
      storeDir_ = explicitDir;
    } else if (!launched) {
      std::string tmpl = std::string(envOr("TMPDIR", "/tmp")) + "/chorus-gloo-XXXXXX";
      std::vector<char> buf(tmpl.begin(), tmpl.end());
      buf.push_back('\0');
      if (!mkdtemp(buf.data())) {
        error_ = "mkdtemp " + tmpl + ": " + strerror(errno);
        return 1;
      }
      storeDir_ = buf.data();
      ownStoreDir_ = true;
    } else {
      const char* job = getenv("CHORUS_SECRET");
      if (!(job && *job)) job = getenv("PMIX_NAMESPACE");
      if (!(job && *job)) job = getenv("OMPI_MCA_ess_base_jobid");
      if (!(job && *job)) {
        error_ = "no rendezvous directory: set CHORUS_GLOO_STORE=DIR (a fresh directory per job)";
        return 1;
      }
      storeDir_ = std::string(envOr("TMPDIR", "/tmp")) + "/chorus-gloo-" + pathSafe(job);
      ownStoreDir_ = true;
    }
    if (mkdir(storeDir_.c_str(), 0700) != 0 && errno != EEXIST) {
      error_ = "mkdir " + storeDir_ + ": " + strerror(errno);
      return 1;
    }

    hostname_ = envOr("CHORUS_GLOO_HOSTNAME", "127.0.0.1");
    rsNative_ = strcmp(envOr("CHORUS_GLOO_REDUCE_SCATTER", "allreduce"), "halving_doubling") == 0;
    const int timeoutSec = atoi(envOr("CHORUS_GLOO_TIMEOUT", "300"));
    timeout_ = std::chrono::milliseconds(1000LL * (timeoutSec > 0 ? timeoutSec : 300));
    return guard("rendezvous", [&] {
      gloo::transport::tcp::attr attr;
      attr.hostname = hostname_;
      std::shared_ptr<gloo::transport::Device> dev = gloo::transport::tcp::CreateDevice(attr);
      auto ctx = std::make_shared<gloo::rendezvous::Context>(rank_, nranks_);
      ctx->setTimeout(timeout_);
      gloo::rendezvous::FileStore store(storeDir_);
      ctx->connectFullMesh(store, dev);
      context_ = ctx;
      device_ = dev;
    });
  }

  const char* name() const override { return "gloo"; }
  std::string version() const override {
    char buf[96];
    snprintf(buf, sizeof buf, "%d.%d.%d (tcp %s%s)", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
             GLOO_VERSION_PATCH, hostname_.c_str(),
             rsNative_ ? ", reduce-scatter: ReduceScatterHalvingDoubling" : "");
    return buf;
  }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  bool supports(DataType t, RedOp op) const override {
    return t != kBfloat16 && t < kNumTypes && op < kNumOps;
  }

  int allReduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op) override {
    if (count == 0) return 0;
    return withType(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return guard("gloo::allreduce", [&] {
        gloo::AllreduceOptions o(context_);
        if (sendbuf != recvbuf) o.setInput(mut<T>(sendbuf), count);
        o.setOutput(static_cast<T*>(recvbuf), count);
        o.setReduceFunction(reduceFn<T>(op));
        o.setTimeout(timeout_);
        gloo::allreduce(o);
        if (op == kAvg) divideBy<T>(recvbuf, count, nranks_);
      });
    });
  }

  int allGather(const void* sendbuf, void* recvbuf, size_t sendcount, DataType t) override {
    if (sendcount == 0) return 0;
    if (nranks_ == 1) return localCopy(recvbuf, sendbuf, sendcount, t);
    return withType(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return guard("gloo::allgather", [&] {
        gloo::AllgatherOptions o(context_);
        // In place (our block already at recvbuf + rank*count): no input buffer.
        if (sendbuf != blockOf(recvbuf, rank_, sendcount, t))
          o.setInput(mut<T>(sendbuf), sendcount);
        o.setOutput(static_cast<T*>(recvbuf), sendcount * static_cast<size_t>(nranks_));
        o.setTimeout(timeout_);
        gloo::allgather(o);
      });
    });
  }

  int reduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, DataType t,
                    RedOp op) override {
    if (recvcount == 0) return 0;
    const size_t total = recvcount * static_cast<size_t>(nranks_);
    if (total > static_cast<size_t>(INT32_MAX)) {
      error_ = "ReduceScatterHalvingDoubling: count does not fit an int";
      return 1;
    }
    const size_t ts = typeSize(t);
    // Both ways reduce in place over the whole input: in place (recvbuf == sendbuf +
    // rank*recvcount) on sendbuf itself, out of place on a copy, since the input must stay
    // untouched. Gloo's algorithm class ReduceScatterHalvingDoubling (CHORUS_GLOO_REDUCE_
    // SCATTER=halving_doubling) leaves this rank's block at the start of the buffer, but
    // overwrites that start while its sends from there may still be in flight (it never
    // waits for them), and gave wrong results at 16-32 MiB on a loaded machine; so by
    // default the twin runs gloo::allreduce and keeps its own block.
    const bool inPlace = recvbuf == blockOf(sendbuf, rank_, recvcount, t);
    char* work = const_cast<char*>(static_cast<const char*>(sendbuf));
    if (!inPlace) {
      if (scratch_.size() < total * ts) scratch_.assign(total * ts, 0);
      work = scratch_.data();
      memcpy(work, sendbuf, total * ts);
    }
    int rc = withType(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (!rsNative_) {
        // Default: an all-reduce of the whole input, then this rank's block.
        return guard("gloo::allreduce (reduce-scatter)", [&] {
          gloo::AllreduceOptions o(context_);
          o.setOutput(reinterpret_cast<T*>(work), total);
          o.setReduceFunction(reduceFn<T>(op));
          o.setTimeout(timeout_);
          gloo::allreduce(o);
          char* mine = work + static_cast<size_t>(rank_) * recvcount * ts;
          if (op == kAvg) divideBy<T>(mine, recvcount, nranks_);
          if (mine != recvbuf) memmove(recvbuf, mine, recvcount * ts);
          work = static_cast<char*>(recvbuf);
        });
      }
      return guard("gloo::ReduceScatterHalvingDoubling", [&] {
        // The algorithm object sets up its buffers once (a collective step): keep the one
        // for the current buffer, size, type and op, as a Gloo user would.
        RsKey key{work, total, t, op};
        if (!rsAlgo_ || !(key == rsKey_)) {
          if (rsAlgo_) {
            // Everyone has finished with the old object before any rank frees it.
            gloo::BarrierOptions b(context_);
            b.setTimeout(timeout_);
            gloo::barrier(b);
            rsAlgo_.reset();
          }
          std::vector<T*> ptrs{reinterpret_cast<T*>(work)};
          std::vector<int> recvElems(static_cast<size_t>(nranks_), static_cast<int>(recvcount));
          rsAlgo_.reset(new gloo::ReduceScatterHalvingDoubling<T>(
              context_, ptrs, static_cast<int>(total), recvElems, reductionFunction<T>(op)));
          rsKey_ = key;
        }
        rsAlgo_->run();
        if (op == kAvg) divideBy<T>(work, recvcount, nranks_);
      });
    });
    if (rc != 0) return rc;
    if (work != recvbuf) memmove(recvbuf, work, recvcount * ts);
    return 0;
  }

  int broadcast(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    if (count == 0) return 0;
    if (nranks_ == 1) return localCopy(recvbuf, sendbuf, count, t);
    return withType(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return guard("gloo::broadcast", [&] {
        gloo::BroadcastOptions o(context_);
        if (rank_ == root && sendbuf != recvbuf) o.setInput(mut<T>(sendbuf), count);
        o.setOutput(static_cast<T*>(recvbuf), count);
        o.setRoot(root);
        o.setTimeout(timeout_);
        gloo::broadcast(o);
      });
    });
  }

  int reduce(const void* sendbuf, void* recvbuf, size_t count, DataType t, RedOp op,
             int root) override {
    if (count == 0) return 0;
    return withType(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return guard("gloo::reduce", [&] {
        // Gloo needs an output on every rank (scratch off the root): recvbuf.
        gloo::ReduceOptions o(context_);
        if (sendbuf != recvbuf) o.setInput(mut<T>(sendbuf), count);
        o.setOutput(static_cast<T*>(recvbuf), count);
        o.setRoot(root);
        o.setReduceFunction(reduceFn<T>(op));
        o.setTimeout(timeout_);
        gloo::reduce(o);
        if (op == kAvg && rank_ == root) divideBy<T>(recvbuf, count, nranks_);
      });
    });
  }

  int allToAll(const void* sendbuf, void* recvbuf, size_t count, DataType t) override {
    if (count == 0) return 0;
    const size_t total = count * static_cast<size_t>(nranks_);
    const size_t ts = typeSize(t);
    const void* in = sendbuf;
    if (sendbuf == recvbuf) {
      // Gloo sends from the input while receiving into the output: in place needs a copy.
      if (scratch_.size() < total * ts) scratch_.assign(total * ts, 0);
      memcpy(scratch_.data(), sendbuf, total * ts);
      in = scratch_.data();
    }
    if (nranks_ == 1) return localCopy(recvbuf, in, count, t);
    return withType(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return guard("gloo::alltoall", [&] {
        gloo::AlltoallOptions o(context_);
        o.setInput(mut<T>(in), total);
        o.setOutput(static_cast<T*>(recvbuf), total);
        o.setTimeout(timeout_);
        gloo::alltoall(o);
      });
    });
  }

  int scatter(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    if (count == 0) return 0;
    if (nranks_ == 1) return localCopy(recvbuf, sendbuf, count, t);
    return withType(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return guard("gloo::scatter", [&] {
        gloo::ScatterOptions o(context_);
        if (rank_ == root) {
          std::vector<T*> ins;
          for (int i = 0; i < nranks_; ++i) ins.push_back(mut<T>(blockOf(sendbuf, i, count, t)));
          o.setInputs(ins, count);
        }
        o.setOutput(static_cast<T*>(recvbuf), count);
        o.setRoot(root);
        o.setTimeout(timeout_);
        gloo::scatter(o);
      });
    });
  }

  int gather(const void* sendbuf, void* recvbuf, size_t count, DataType t, int root) override {
    if (count == 0) return 0;
    if (nranks_ == 1) return localCopy(recvbuf, sendbuf, count, t);
    return withType(t, [&](auto tag) {
      using T = typename decltype(tag)::type;
      return guard("gloo::gather", [&] {
        gloo::GatherOptions o(context_);
        o.setInput(mut<T>(sendbuf), count);
        if (rank_ == root)
          o.setOutput(static_cast<T*>(recvbuf), count * static_cast<size_t>(nranks_));
        o.setRoot(root);
        o.setTimeout(timeout_);
        gloo::gather(o);
      });
    });
  }

  int sendRecv(const void* sendbuf, int sendPeer, void* recvbuf, int recvPeer, size_t count,
               DataType t) override {
    const size_t bytes = count * typeSize(t);
    if (bytes == 0) return 0;
    if (sendPeer == rank_ && recvPeer == rank_) return localCopy(recvbuf, sendbuf, count, t);
    return guard("gloo send/recv", [&] {
      const uint64_t slot = gloo::Slot::build(kSendRecvSlotPrefix, 0);
      auto out = context_->createUnboundBuffer(recvbuf, bytes);
      auto in = context_->createUnboundBuffer(const_cast<void*>(sendbuf), bytes);
      out->recv(recvPeer, slot);
      in->send(sendPeer, slot);
      in->waitSend(timeout_);
      out->waitRecv(timeout_);
    });
  }

  int barrierColl() override { return barrier(); }

  int barrier() override {
    if (nranks_ == 1) return 0;
    return guard("gloo::barrier", [&] {
      gloo::BarrierOptions o(context_);
      o.setTimeout(timeout_);
      gloo::barrier(o);
    });
  }

  int allGatherBytes(const void* in, void* out, size_t bytes) override {
    return allGather(in, out, bytes, kUint8);
  }

  int allReduceDoubles(double* values, int n, RedOp op) override {
    return allReduce(values, values, static_cast<size_t>(n), kDouble, op);
  }

  std::string errorString() const override { return error_; }

  // Gloo has no abort: the driver exits right after this, and the launcher (chorusrun,
  // mpirun) then ends the other ranks; peers blocked in Gloo also give up after the
  // operation timeout (CHORUS_GLOO_TIMEOUT).
  void abortJob() override {}

  int finalize() override {
    // After this barrier no rank still reads the store or waits on a peer.
    int rc = barrier();
    rsAlgo_.reset();
    if (rc == 0 && ownStoreDir_ && rank_ == 0) removeStoreDir(storeDir_);
    context_.reset();
    device_.reset();
    return rc;
  }

 private:
  struct RsKey {
    const void* buf;
    size_t count;
    DataType type;
    RedOp op;
    bool operator==(const RsKey& o) const {
      return buf == o.buf && count == o.count && type == o.type && op == o.op;
    }
  };

  // Runs f, turning a Gloo exception into a failed call.
  template <typename F>
  int guard(const char* what, F&& f) {
    try {
      f();
      return 0;
    } catch (const std::exception& e) {
      error_ = std::string(what) + ": " + e.what();
    } catch (...) {
      error_ = std::string(what) + ": unknown exception";
    }
    return 1;
  }

  // Gloo's option setters take non-const pointers even for inputs it only reads.
  template <typename T>
  static T* mut(const void* p) {
    return static_cast<T*>(const_cast<void*>(p));
  }
  static const char* blockOf(const void* buf, int block, size_t count, DataType t) {
    return elemPtr(buf, static_cast<size_t>(block) * count, t);
  }
  // One rank: the collectives whose Gloo version needs a peer just copy.
  static int localCopy(void* dst, const void* src, size_t count, DataType t) {
    if (dst != src) memmove(dst, src, count * typeSize(t));
    return 0;
  }

  int rank_ = 0;
  int nranks_ = 1;
  std::string storeDir_;
  bool ownStoreDir_ = false;
  std::string hostname_ = "127.0.0.1";
  std::chrono::milliseconds timeout_{300000};
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  std::unique_ptr<gloo::Algorithm> rsAlgo_;
  RsKey rsKey_{nullptr, 0, kFloat, kSum};
  bool rsNative_ = false;  // CHORUS_GLOO_REDUCE_SCATTER=halving_doubling
  std::vector<char> scratch_;
  std::string error_;
};

}  // namespace

Backend* makeGlooBackend() { return new GlooBackend(); }

}  // namespace perf
