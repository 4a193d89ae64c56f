#pragma once
// What this machine allows, measured in the same run as the benchmark it judges: memory bandwidth
// (a STREAM-like triad), the FMA peak (multiply-adds in registers) and a GEMM rate (Eigen, built
// with the same flags as the engine's kernels).

#include <cstddef>

namespace mf::runtime {

// The rates of one thread count.
struct HardwareRates {
  int threads = 1;
  double bandwidth_bytes_per_s = 0;  // triad, STREAM byte counting (3 arrays x 8 bytes per element)
  double gemm_flops_per_s = 0;       // 2*n^3 per n x n x n float GEMM
  double fma_flops_per_s = 0;        // float multiply-adds in registers (2 FLOPs each): the peak
};

struct HardwareProbe {
  size_t triad_bytes_per_array = 0;  // 0: 4x the last-level cache, at least 256 MiB, at most 1 GiB
  int gemm_n = 1024;
  int repeats = 5;  // best of
};

// Best-of-`repeats` triad a[i] = b[i] + s*c[i] over doubles, split across `threads` threads that
// also first-touch their own slice (so pages sit where they are used). Bytes per second.
double measure_triad_bandwidth(int threads, size_t bytes_per_array, int repeats);

// Best-of-`repeats` float GEMM C = A*B on n x n matrices, rows of C split across `threads` threads
// (one Eigen product each, as the engine's matmul splits rows). FLOP per second.
double measure_gemm_rate(int threads, int n, int repeats);

// The triad's array size for a probe: its own value, or the default from the cache size.
size_t triad_bytes_per_array(const HardwareProbe& probe);

// Best-of-`repeats` rate of float multiply-adds on registers alone, `threads` threads: the
// arithmetic peak no kernel can pass. FLOP per second.
double measure_fma_peak(int threads, int repeats);

HardwareRates measure_hardware(int threads, const HardwareProbe& probe);

}  // namespace mf::runtime
