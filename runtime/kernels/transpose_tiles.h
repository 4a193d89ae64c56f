#pragma once
// The copy behind layout transposes (NCHW <-> NHWC and every other transpose that, once its axes
// are collapsed, swaps the last two): a stack of matrices stored column by column written out row
// by row. A row-by-row gather reads each element of a row from a different cache line; this reads
// and writes whole lines, 16 x 16 elements at a time.

#include <cstddef>
#include <cstdint>

namespace mf::runtime::ops {

// One matrix of the stack: dst[a * cols + b] = src[a + b * ld] for a < rows, b < cols
// (src's column b starts at src + b * ld; ld >= 1 in elements). elem_size is 1, 4 or 8
// (every dtype's size).
// Runs on the calling thread; rows [row_begin, row_end) only, so callers split the work.
void transpose_rows(const void* src, int64_t ld, int64_t row_begin, int64_t row_end, int64_t cols,
                    size_t elem_size, void* dst);

}  // namespace mf::runtime::ops
