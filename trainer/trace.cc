#include "trainer/trace.h"

#include <cstdio>
#include <stdexcept>

namespace trainer {

TraceWriter::TraceWriter(bool enabled, int rank)
    : enabled_(enabled), rank_(rank), label_("rank " + std::to_string(rank)) {}

// The monotonic clock is one clock for all processes of a host, so the per-rank files of a
// job line up when merged into one trace (tests/trainer/pipeline_trace.py).
double TraceWriter::nowUs() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void TraceWriter::span(const std::string& name, Lane lane, double startUs, double endUs,
                       const std::string& args) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back({name, lane, startUs, endUs - startUs, args});
}

void TraceWriter::write(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write trace file " + path);
  std::lock_guard<std::mutex> lock(mutex_);
  std::fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  // Lane names, so the viewer shows "main" and "chorus stream" instead of numbers.
  std::fprintf(
      f,
      "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"%s\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"main "
      "(compute)\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":\"chorus "
      "stream (all-reduce)\"}},\n"
      "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":2,\"args\":{\"name\":"
      "\"pipeline send/recv\"}}",
      rank_, label_.c_str(), rank_, rank_, rank_);
  for (const Event& e : events_) {
    // Names are ours (no quotes or backslashes), so no escaping is needed.
    std::fprintf(f,
                 ",\n{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.1f,\"dur\":%.1f",
                 e.name.c_str(), rank_, int(e.lane), e.start, e.dur);
    if (!e.args.empty()) std::fprintf(f, ",\"args\":{%s}", e.args.c_str());
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n]}\n");
  if (std::fclose(f) != 0) throw std::runtime_error("error writing trace file " + path);
}

}  // namespace trainer
