#include "trainer/idx.h"

#include <zlib.h>

#include <stdexcept>

namespace trainer {
namespace {

constexpr int kUbyteType = 0x08;
constexpr int64_t kMaxItems = int64_t(1) << 31;  // far above any MNIST-like set

// zlib's gz* functions read plain files too, so an unpacked copy works as well.
class GzFile {
 public:
  explicit GzFile(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
    if (!f_) throw std::runtime_error("cannot open " + path);
  }
  ~GzFile() { gzclose(f_); }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;

  void readExact(void* dst, size_t n) {
    auto* p = static_cast<unsigned char*>(dst);
    while (n > 0) {
      unsigned chunk = n > (1u << 30) ? (1u << 30) : unsigned(n);
      int got = gzread(f_, p, chunk);
      if (got <= 0) throw std::runtime_error(path_ + ": truncated or not gzip/IDX data");
      p += got;
      n -= size_t(got);
    }
  }
  uint32_t readBigEndian32() {
    unsigned char b[4];
    readExact(b, 4);
    return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | b[3];
  }

 private:
  std::string path_;
  gzFile f_;
};

}  // namespace

IdxArray readIdx(const std::string& path, int expectedRank, int64_t maxItems) {
  GzFile f(path);
  uint32_t magic = f.readBigEndian32();
  // Magic: two zero bytes, the element type, the number of dimensions.
  if ((magic >> 16) != 0 || int((magic >> 8) & 0xff) != kUbyteType ||
      int(magic & 0xff) != expectedRank)
    throw std::runtime_error(path + ": not an IDX ubyte file with " + std::to_string(expectedRank) +
                             " dimension(s)");
  IdxArray a;
  int64_t total = 1;
  for (int i = 0; i < expectedRank; ++i) {
    int64_t d = f.readBigEndian32();
    if (d <= 0 || d > kMaxItems) throw std::runtime_error(path + ": bad dimension size");
    if (i == 0 && maxItems > 0 && maxItems < d) d = maxItems;  // the rest is never inflated
    a.dims.push_back(d);
    total *= d;
    if (total > kMaxItems * 1024) throw std::runtime_error(path + ": implausibly large");
  }
  a.data.resize(size_t(total));
  f.readExact(a.data.data(), a.data.size());
  return a;
}

}  // namespace trainer
