#include "tools/chorusrun/output.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace chorusrun {

void writeAll(Sink* sink, const char* data, size_t len) {
  while (len > 0 && !sink->broken) {
    ssize_t n = ::write(sink->fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      // EPIPE (SIGPIPE is ignored in chorusrun), EBADF, EIO...: stop writing here.
      sink->broken = true;
      return;
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
}

void LineTagger::feed(const char* data, size_t len) {
  out_.clear();
  const char* end = data + len;
  while (data < end) {
    const char* nl =
        static_cast<const char*>(std::memchr(data, '\n', static_cast<size_t>(end - data)));
    if (nl == nullptr) {
      // No newline in the rest: keep it, cutting overlong lines into kMaxLine pieces.
      size_t rest = static_cast<size_t>(end - data);
      while (partial_.size() + rest >= kMaxLine) {
        size_t take = kMaxLine - partial_.size();
        out_ += prefix_;
        out_ += partial_;
        out_.append(data, take);
        out_ += '\n';
        partial_.clear();
        data += take;
        rest -= take;
      }
      partial_.append(data, rest);
      break;
    }
    out_ += prefix_;
    out_ += partial_;
    out_.append(data, static_cast<size_t>(nl - data) + 1);
    partial_.clear();
    data = nl + 1;
  }
  if (!out_.empty()) writeAll(sink_, out_.data(), out_.size());
}

void LineTagger::finish() {
  if (partial_.empty()) return;
  out_.clear();
  out_ += prefix_;
  out_ += partial_;
  out_ += '\n';
  partial_.clear();
  writeAll(sink_, out_.data(), out_.size());
}

}  // namespace chorusrun
