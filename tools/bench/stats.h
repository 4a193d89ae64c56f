#pragma once
// Order statistics of timing samples: what `mf bench` reports per cell (median and spread).

#include <cstddef>
#include <vector>

namespace mf::tools::bench {

// Five-number summary of a sample. Quartiles interpolate linearly between order statistics
// (NumPy's default), so two samples give q1/q3 between them rather than at the extremes.
struct Summary {
  size_t count = 0;
  double min = 0, q1 = 0, median = 0, q3 = 0, max = 0;
};

// InvalidArgument for an empty sample.
Summary summarize(std::vector<double> samples);

}  // namespace mf::tools::bench
