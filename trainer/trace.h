// trace.h — a Chrome trace (chrome://tracing, Perfetto) of one rank's training steps.
//
// Spans ("X" events) for forward, backward, waits and every bucket all-reduce, so that one
// can see the all-reduce of early buckets running while backward is still busy. Times are
// microseconds on the host's monotonic clock (the same in every process); pid is the rank, tid
// names the lane (main thread communication stream, or pipeline send/recv).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace trainer {

class TraceWriter {
 public:
  enum Lane { kMainLane = 0, kCommLane = 1, kP2pLane = 2 };

  TraceWriter(bool enabled, int rank);
  bool enabled() const { return enabled_; }
  /// The process name shown for this rank (default "rank R"), e.g. with its pipeline stage.
  void setLabel(const std::string& label) { label_ = label; }
  /// Microseconds on the host's monotonic clock (the trace's time base).
  double nowUs() const;
  /// A finished span from startUs to endUs; `args` is a JSON object body or "".
  void span(const std::string& name, Lane lane, double startUs, double endUs,
            const std::string& args = "");
  /// Writes the JSON file; throws std::runtime_error if it cannot.
  void write(const std::string& path) const;

 private:
  struct Event {
    std::string name;
    Lane lane;
    double start, dur;
    std::string args;
  };
  bool enabled_;
  int rank_;
  std::string label_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
};

}  // namespace trainer
