#include "runtime/machine_limits.h"

#include <unistd.h>

#include <immintrin.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "base/error.h"

namespace mf::runtime {
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

namespace {

// One thread's multiply-add chains; returns a value that depends on every one (so none is
// dropped) and sets `flops` to the FLOPs done. The widest FMA instruction the build targets (the
// library is built for the machine, -march=native): AVX-512, else AVX2 + FMA, else plain
// multiplies and adds (two instructions, still 2 FLOPs a pair).
float fma_chains(int64_t steps, float seed, double* flops) {
  constexpr int kChains = 12;  // independent chains: enough to cover the FMA latency
#if defined(__AVX512F__)
  __m512 acc[kChains];
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(seed);
  for (__m512& v : acc) v = a;
  for (int64_t i = 0; i < steps; ++i) {
    for (__m512& v : acc) v = _mm512_fmadd_ps(v, m, a);
  }
  float total = 0;
  for (const __m512& v : acc) total += _mm512_reduce_add_ps(v);
  *flops = 2.0 * 16 * kChains * double(steps);
#elif defined(__FMA__) && defined(__AVX__)
  __m256 acc[kChains];
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(seed);
  for (__m256& v : acc) v = a;
  for (int64_t i = 0; i < steps; ++i) {
    for (__m256& v : acc) v = _mm256_fmadd_ps(v, m, a);
  }
  float total = 0;
  alignas(32) float lanes[8];
  for (const __m256& v : acc) {
    _mm256_store_ps(lanes, v);
    for (float x : lanes) total += x;
  }
  *flops = 2.0 * 8 * kChains * double(steps);
#else
  float acc[kChains];
  for (float& v : acc) v = seed;
  for (int64_t i = 0; i < steps; ++i) {
    for (float& v : acc) v = v * 0.999999f + seed;
  }
  float total = 0;
  for (float v : acc) total += v;
  *flops = 2.0 * kChains * double(steps);
#endif
  return total;
}

}  // namespace

double measure_fma_peak(int threads, int repeats) {
  MF_CHECK(threads >= 1 && repeats >= 1, InvalidArgument,
           "FMA probe needs threads >= 1 and repeats >= 1");
  constexpr int64_t kSteps = int64_t{1} << 21;
  std::vector<float> sums(size_t(threads), 0.0f);
  std::vector<double> flops(size_t(threads), 0.0);
  double best = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = Clock::now();
    split_across(threads, size_t(threads), [&](int t, size_t, size_t) {
      sums[size_t(t)] = fma_chains(kSteps, 1e-7f * float(t + 1), &flops[size_t(t)]);
    });
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / seconds);
  }
  for (float v : sums) MF_CHECK(std::isfinite(v), Internal, "FMA probe produced ", v);
  return best;
}

HardwareRates measure_hardware(int threads, const HardwareProbe& probe) {
  HardwareRates rates;
  rates.threads = threads;
  rates.bandwidth_bytes_per_s =
      measure_triad_bandwidth(threads, triad_bytes_per_array(probe), probe.repeats);
  rates.gemm_flops_per_s = measure_gemm_rate(threads, probe.gemm_n, probe.repeats);
  rates.fma_flops_per_s = measure_fma_peak(threads, probe.repeats);
  return rates;
}

}  // namespace mf::runtime
