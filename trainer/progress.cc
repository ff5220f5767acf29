#include "trainer/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace trainer {

ProgressBar::ProgressBar(bool enabled, int64_t total, std::string label)
    : enabled_(enabled && isatty(STDERR_FILENO)),
      total_(total > 0 ? total : 1),
      label_(std::move(label)) {}

void ProgressBar::update(int64_t done, double loss) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (done < total_ && now - lastDraw_ < std::chrono::milliseconds(100)) return;
  lastDraw_ = now;
  constexpr int kWidth = 30;
  int filled = int(done * kWidth / total_);
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = 0;
  // NaN: no loss known here (rank 0 is a pipeline's first stage; the last computes it).
  if (std::isnan(loss))
    std::fprintf(stderr, "\r%s [%s] %lld/%lld", label_.c_str(), bar, (long long)done,
                 (long long)total_);
  else
    std::fprintf(stderr, "\r%s [%s] %lld/%lld loss %.4f", label_.c_str(), bar, (long long)done,
                 (long long)total_, loss);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace trainer
