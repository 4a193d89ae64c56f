#include "tools/bench/stats.h"

#include <algorithm>

#include "base/error.h"

namespace mf::tools::bench {
namespace {

// The q-quantile of sorted values, interpolating between neighbours.
double quantile(const std::vector<double>& sorted, double q) {
  const double position = q * double(sorted.size() - 1);
  const size_t below = size_t(position);
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - double(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

}  // namespace

Summary summarize(std::vector<double> samples) {
  MF_CHECK(!samples.empty(), InvalidArgument, "no samples to summarize");
  std::sort(samples.begin(), samples.end());
  Summary s;
  s.count = samples.size();
  s.min = samples.front();
  s.max = samples.back();
  s.q1 = quantile(samples, 0.25);
  s.median = quantile(samples, 0.5);
  s.q3 = quantile(samples, 0.75);
  return s;
}

}  // namespace mf::tools::bench
