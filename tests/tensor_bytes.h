#pragma once
// A tensor's bytes, for tests that promise the same bits: compared as bytes, -0.0 differs from 0.0
// and a NaN equals itself, which comparing values would get wrong both ways.

#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "ir/dtype.h"

namespace mf::testing {

inline std::vector<uint8_t> bytes_of(const Tensor& t) {
  t.sync();
  const auto* data = static_cast<const uint8_t*>(t.raw_data());
  const size_t n = static_cast<size_t>(t.numel()) * ir::dtype_size(t.dtype());
  return std::vector<uint8_t>(data, data + n);
}

}  // namespace mf::testing
