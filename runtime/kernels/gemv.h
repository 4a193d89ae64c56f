#pragma once
// The float32 product of one row by a matrix (matmul with m == 1: a network's classifier at batch
// 1), computed directly. It is bound by reading the matrix once; oneDNN's brgemm, built for blocks
// of rows, read mobilenet_v2's 1280x1000 classifier at 10 GB/s (0.49 ms) where a streaming pass
// reaches the cache's 31 GB/s (0.16 ms).
//
// Each output is a sum in an order fixed by k alone (sixteen partial sums over k, eight without
// AVX-512, then combined in a fixed tree; or, for a (k, n) matrix, k terms in order), and outputs
// are split across threads whole: the same bits at any thread count.

#include <cstdint>

namespace mf::runtime::ops {

// y (n) = a (k) times b, where b is stored (n, k) row-major when `b_transposed` (each output a dot
// product of a with one row), else (k, n); then + bias (n values, or null), rounded after the
// product as matmul then add round.
void gemv_f32(const float* a, const float* b, const float* bias, float* y, int64_t k, int64_t n,
              bool b_transposed);

}  // namespace mf::runtime::ops
