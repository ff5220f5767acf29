// progress.h — a one-line progress bar for rank 0 on a terminal.
//
// Only drawn when stderr is a terminal (never into logs or test output), redrawn at most
// ten times a second so it costs nothing next to a training step.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace trainer {

class ProgressBar {
 public:
  /// `enabled` is further restricted to stderr being a terminal.
  ProgressBar(bool enabled, int64_t total, std::string label);
  /// `loss`: the running mean so far, or NaN where this rank does not know it (shown as
  /// steps only).
  void update(int64_t done, double loss);
  /// Clears the line so that the epoch summary starts on a clean line.
  void finish();

 private:
  bool enabled_;
  int64_t total_;
  std::string label_;
  std::chrono::steady_clock::time_point lastDraw_{};
};

}  // namespace trainer
