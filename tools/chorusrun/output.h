// Output plumbing for --tag-output: turn a rank's byte stream into whole,
// prefixed lines written to one of chorusrun's own descriptors.
#pragma once

#include <cstddef>
#include <string>

namespace chorusrun {

// A destination descriptor (chorusrun's stdout or stderr). Once a write fails
// (EPIPE: the reader went away), further output is dropped, but the ranks'
// pipes are still drained so that no rank blocks on a full pipe.
struct Sink {
  int fd = -1;
  bool broken = false;
};

// Writes all of [data, data+len) to the sink, retrying short writes and EINTR.
// Nothing else writes to a sink while this runs (chorusrun is single-threaded),
// so a buffer of whole lines reaches the sink without any other line inside it.
void writeAll(Sink* sink, const char* data, size_t len);

// Splits one rank stream into lines and emits "<prefix><line>\n" for each
// complete line. Several complete lines are batched into one write; a line is
// never split, except that a line longer than kMaxLine bytes is emitted in
// kMaxLine-sized pieces (each prefixed and newline-terminated) so that a rank
// printing without newlines cannot grow chorusrun's memory without bound.
class LineTagger {
 public:
  static constexpr size_t kMaxLine = 1 << 20;

  LineTagger(Sink* sink, std::string prefix) : sink_(sink), prefix_(std::move(prefix)) {}

  // Consumes bytes read from the rank.
  void feed(const char* data, size_t len);
  // End of stream: a trailing partial line is emitted with a newline added.
  void finish();

 private:
  Sink* sink_;
  std::string prefix_;
  std::string partial_;  // bytes after the last newline seen
  std::string out_;      // scratch buffer for one batched write
};

}  // namespace chorusrun
