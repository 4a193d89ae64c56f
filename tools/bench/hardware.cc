#include "tools/bench/hardware.h"

#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "base/error.h"

namespace mf::tools::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Runs fn(thread_index, begin, end) over [0, count) split evenly across `threads` threads.
template <typename Fn>
void split_across(int threads, size_t count, Fn&& fn) {
  std::vector<std::thread> workers;
  const size_t chunk = (count + size_t(threads) - 1) / size_t(threads);
  for (int t = 0; t < threads; ++t) {
    const size_t begin = std::min(count, size_t(t) * chunk);
    const size_t end = std::min(count, begin + chunk);
    workers.emplace_back([&fn, t, begin, end] { fn(t, begin, end); });
  }
  for (std::thread& w : workers) w.join();
}

size_t last_level_cache_bytes() {
  long bytes = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
  bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (bytes <= 0) bytes = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
  return bytes > 0 ? size_t(bytes) : size_t(32) << 20;
}

}  // namespace

size_t triad_bytes_per_array(const HardwareProbe& probe) {
  if (probe.triad_bytes_per_array > 0) return probe.triad_bytes_per_array;
  // Four times the last-level cache per array keeps every pass coming from DRAM.
  return std::clamp(4 * last_level_cache_bytes(), size_t(256) << 20, size_t(1) << 30);
}

double measure_triad_bandwidth(int threads, size_t bytes_per_array, int repeats) {
  MF_CHECK(threads >= 1 && repeats >= 1, InvalidArgument,
           "triad needs threads >= 1 and repeats >= 1");
  const size_t n = std::max<size_t>(bytes_per_array / sizeof(double), 1024);
  // new[] without value-initialization: the threads below first-touch their own slices.
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
  split_across(threads, n, [&](int, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) a[i] = 0.0, b[i] = 1.0, c[i] = 2.0;
  });
  const double scalar = 3.0;
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    split_across(threads, n, [&](int, size_t begin, size_t end) {
      double* __restrict pa = a.get();
      const double* __restrict pb = b.get();
      const double* __restrict pc = c.get();
      for (size_t i = begin; i < end; ++i) pa[i] = pb[i] + scalar * pc[i];
    });
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 3.0 * sizeof(double) * double(n) / seconds);
  }
  // Read the result so the loops cannot be dropped.
  MF_CHECK(a[n / 2] == 7.0, Internal, "triad computed ", a[n / 2], " instead of 7");
  return best;
}

double measure_gemm_rate(int threads, int n, int repeats) {
  MF_CHECK(threads >= 1 && n >= 1 && repeats >= 1, InvalidArgument,
           "GEMM probe needs threads, n and repeats >= 1");
  using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Matrix a = Matrix::Random(n, n), b = Matrix::Random(n, n);
  Matrix c = Matrix::Zero(n, n);
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    split_across(threads, size_t(n), [&](int, size_t begin, size_t end) {
      if (end > begin) {
        c.middleRows(Eigen::Index(begin), Eigen::Index(end - begin)).noalias() =
            a.middleRows(Eigen::Index(begin), Eigen::Index(end - begin)) * b;
      }
    });
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2.0 * double(n) * double(n) * double(n) / seconds);
  }
  MF_CHECK(std::isfinite(c(n / 2, n / 2)), Internal, "GEMM probe produced a non-finite value");
  return best;
}

HardwareRates measure_hardware(int threads, const HardwareProbe& probe) {
  HardwareRates rates;
  rates.threads = threads;
  rates.bandwidth_bytes_per_s =
      measure_triad_bandwidth(threads, triad_bytes_per_array(probe), probe.repeats);
  rates.gemm_flops_per_s = measure_gemm_rate(threads, probe.gemm_n, probe.repeats);
  return rates;
}

}  // namespace mf::tools::bench
