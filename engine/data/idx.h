#pragma once
// Reading IDX files, the format of MNIST and Fashion-MNIST: a 4-byte magic (0, 0, element type,
// rank), `rank` big-endian uint32 dimensions, then the elements row-major, big-endian. Files may be
// gzip-compressed (recognized by the bytes 1f 8b, as Debian's dataset packages ship them).
//
// Nothing in the file is trusted before it is checked: the magic, the type code, the rank, each
// dimension and their product (no overflow), and the payload's size against what the header
// declares. A damaged or truncated file, or a corrupt gzip stream, is a DataLoss error naming the
// file and what was wrong. Only as many bytes as the header declares are ever decompressed (plus
// one, to notice extra data), so a gzip bomb cannot exhaust memory.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "ir/shape.h"

namespace mf::data {

// The element type codes of the IDX format.
enum class IdxType : uint8_t {
  kUInt8 = 0x08,
  kInt8 = 0x09,
  kInt16 = 0x0B,
  kInt32 = 0x0C,
  kFloat32 = 0x0D,
  kFloat64 = 0x0E,
};

// Bytes per element of an IDX type.
size_t idx_type_size(IdxType type);
// "uint8", "int32", ... for messages.
std::string_view idx_type_name(IdxType type);

struct IdxArray {
  IdxType type = IdxType::kUInt8;
  ir::Shape shape;
  // num_elements(shape) * idx_type_size(type) bytes, row-major, in this machine's byte order
  // (the file's big-endian elements are swapped on reading).
  std::vector<uint8_t> bytes;

  int64_t num_elements() const { return ir::num_elements(shape); }
};

// The largest payload read_idx accepts by default: the 60,000 Fashion-MNIST training images are
// 47 MB; 4 GiB leaves room for larger sets while bounding what a lying header can make us allocate.
inline constexpr uint64_t kMaxIdxPayloadBytes = uint64_t{4} << 30;

// Reads an IDX file, raw or gzip-compressed. NotFound when it does not exist; InvalidArgument when
// it is not a regular file or declares more than max_payload_bytes; DataLoss for any damage.
IdxArray read_idx(const std::filesystem::path& file,
                  uint64_t max_payload_bytes = kMaxIdxPayloadBytes);

// The bytes of an IDX file (uncompressed), for tests and tools that write data sets.
std::vector<uint8_t> encode_idx(IdxType type, const ir::Shape& shape, const void* host_order_data);

// `bytes` as one gzip member (what gzip(1) writes), for writers of .gz data sets and for tests.
std::vector<uint8_t> gzip_compress(std::span<const uint8_t> bytes);

}  // namespace mf::data
