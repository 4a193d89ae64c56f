#pragma once
// Reading and writing NumPy .npy files (format 1.0/2.0/3.0, little-endian, C order), the exchange
// format of `mf run --input` and `--output-dir`. A malformed file fails with DataLoss or
// InvalidArgument naming the file and what was wrong; nothing is half-written (writes go to a
// temporary file renamed in place).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace mf::npy {

struct Array {
  ir::DType dtype = ir::DType::kFloat32;
  ir::Shape shape;
  std::vector<uint8_t> bytes;  // num_elements(shape) * dtype_size(dtype), row-major
};

Array load(const std::filesystem::path& file);
void save(const std::filesystem::path& file, ir::DType dtype, const ir::Shape& shape,
          const void* data);

// The header's descr for a dtype ("<f4") and back; used by the format and its tests.
std::string descr_of(ir::DType dtype);

}  // namespace mf::npy
