#include "engine/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace mf::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct DescrEntry {
  std::string_view descr;
  ir::DType dtype;
};
// "|b1" is numpy's bool; "<i8" int64, "<i4" int32, "<f4" float32, "<f8" float64.
constexpr DescrEntry kDescrs[] = {{"<f4", ir::DType::kFloat32},
                                  {"<f8", ir::DType::kFloat64},
                                  {"<i4", ir::DType::kInt32},
                                  {"<i8", ir::DType::kInt64},
                                  {"|b1", ir::DType::kBool}};

// Finds the value text of 'key' in the header dict: {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }
std::string dict_value(const std::string& header, std::string_view key,
                       const std::filesystem::path& file) {
  const std::string quoted = "'" + std::string(key) + "'";
  const size_t at = header.find(quoted);
  MF_CHECK(at != std::string::npos, DataLoss, file.string(), ": .npy header has no '", key,
           "' entry: ", header);
  size_t colon = header.find(':', at + quoted.size());
  MF_CHECK(colon != std::string::npos, DataLoss, file.string(), ": .npy header is malformed near '",
           key, "'");
  size_t begin = header.find_first_not_of(' ', colon + 1);
  MF_CHECK(begin != std::string::npos, DataLoss, file.string(), ": .npy header ends after '", key,
           "'");
  size_t end;
  if (header[begin] == '(') {
    end = header.find(')', begin);
    MF_CHECK(end != std::string::npos, DataLoss, file.string(), ": .npy shape tuple is not closed");
    return header.substr(begin, end - begin + 1);
  }
  if (header[begin] == '\'') {
    end = header.find('\'', begin + 1);
    MF_CHECK(end != std::string::npos, DataLoss, file.string(),
             ": .npy header string is not closed");
    return header.substr(begin + 1, end - begin - 1);
  }
  end = header.find_first_of(",}", begin);
  MF_CHECK(end != std::string::npos, DataLoss, file.string(), ": .npy header is malformed near '",
           key, "'");
  std::string value = header.substr(begin, end - begin);
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

ir::Shape parse_shape(const std::string& tuple, const std::filesystem::path& file) {
  ir::Shape shape;
  std::string inner = tuple.substr(1, tuple.size() - 2);
  std::stringstream in(inner);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t b = item.find_first_not_of(' ');
    if (b == std::string::npos) continue;  // the trailing comma of "(3,)"
    item = item.substr(b);
    int64_t dim = 0;
    size_t used = 0;
    try {
      dim = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    MF_CHECK(used > 0 && dim >= 0, DataLoss, file.string(), ": .npy shape ", tuple,
             " has a bad dimension '", item, "'");
    shape.push_back(dim);
  }
  return shape;
}

}  // namespace

std::string descr_of(ir::DType dtype) {
  for (const auto& entry : kDescrs) {
    if (entry.dtype == dtype) return std::string(entry.descr);
  }
  MF_FAIL(Internal, "no .npy descr for dtype ", ir::dtype_name(dtype));
}

Array load(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  MF_CHECK(in.good(), NotFound, "cannot open .npy file '", file.string(),
           "': ", std::filesystem::exists(file) ? "permission denied" : "no such file");
  char magic[kMagicSize] = {};
  in.read(magic, kMagicSize);
  MF_CHECK(in.gcount() == kMagicSize && std::memcmp(magic, kMagic, kMagicSize) == 0, DataLoss,
           file.string(), ": not a .npy file (the magic string \\x93NUMPY is missing)");
  unsigned char version[2] = {};
  in.read(reinterpret_cast<char*>(version), 2);
  MF_CHECK(in.gcount() == 2 && version[0] >= 1 && version[0] <= 3, DataLoss, file.string(),
           ": unsupported .npy format version ", int(version[0]), ".", int(version[1]),
           " (1.0 to 3.0 are read)");
  uint32_t header_len = 0;
  if (version[0] == 1) {
    unsigned char len[2] = {};
    in.read(reinterpret_cast<char*>(len), 2);
    MF_CHECK(in.gcount() == 2, DataLoss, file.string(),
             ": .npy file is truncated in its header length");
    header_len = len[0] | (len[1] << 8);
  } else {
    unsigned char len[4] = {};
    in.read(reinterpret_cast<char*>(len), 4);
    MF_CHECK(in.gcount() == 4, DataLoss, file.string(),
             ": .npy file is truncated in its header length");
    header_len = len[0] | (len[1] << 8) | (len[2] << 16) | (uint32_t(len[3]) << 24);
  }
  MF_CHECK(header_len < (1u << 20), DataLoss, file.string(), ": .npy header length ", header_len,
           " is implausible");
  std::string header(header_len, '\0');
  in.read(header.data(), header_len);
  MF_CHECK(in.gcount() == std::streamsize(header_len), DataLoss, file.string(),
           ": .npy file is truncated in its header");

  Array array;
  const std::string descr = dict_value(header, "descr", file);
  bool known = false;
  for (const auto& entry : kDescrs) {
    if (entry.descr == descr || (descr == "<b1" && entry.dtype == ir::DType::kBool)) {
      array.dtype = entry.dtype;
      known = true;
    }
  }
  MF_CHECK(known, InvalidArgument, file.string(), ": .npy dtype '", descr,
           "' is not supported; use float32 (<f4), float64 (<f8), int32 (<i4), int64 (<i8) or bool "
           "(|b1)");
  MF_CHECK(dict_value(header, "fortran_order", file) == "False", InvalidArgument, file.string(),
           ": Fortran-ordered .npy arrays are not supported; save with np.ascontiguousarray first");
  array.shape = parse_shape(dict_value(header, "shape", file), file);

  const size_t bytes = size_t(ir::num_elements(array.shape)) * ir::dtype_size(array.dtype);
  array.bytes.resize(bytes);
  in.read(reinterpret_cast<char*>(array.bytes.data()), std::streamsize(bytes));
  MF_CHECK(in.gcount() == std::streamsize(bytes), DataLoss, file.string(),
           ": .npy data is truncated: expected ", bytes, " bytes for shape ",
           ir::shape_to_string(array.shape), ", found ", in.gcount());
  return array;
}

void save(const std::filesystem::path& file, ir::DType dtype, const ir::Shape& shape,
          const void* data) {
  std::string shape_text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    shape_text += std::to_string(shape[i]) + (shape.size() == 1      ? ","
                                              : i + 1 < shape.size() ? ", "
                                                                     : "");
  shape_text += ")";
  std::string header =
      "{'descr': '" + descr_of(dtype) + "', 'fortran_order': False, 'shape': " + shape_text + ", }";
  // Pad so that the data starts on a 64-byte boundary, as numpy does; the header ends in '\n'.
  const size_t unpadded = kMagicSize + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');

  std::filesystem::path tmp = file;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    MF_CHECK(out.good(), InvalidArgument, "cannot write '", file.string(),
             "': the directory is missing or not writable");
    out.write(kMagic, kMagicSize);
    const char version[2] = {1, 0};
    out.write(version, 2);
    const uint16_t len = uint16_t(header.size());
    const char len_bytes[2] = {char(len & 0xff), char(len >> 8)};
    out.write(len_bytes, 2);
    out.write(header.data(), std::streamsize(header.size()));
    out.write(static_cast<const char*>(data),
              std::streamsize(size_t(ir::num_elements(shape)) * ir::dtype_size(dtype)));
    MF_CHECK(out.good(), InvalidArgument, "writing '", file.string(), "' failed (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  MF_CHECK(!ec, InvalidArgument, "cannot move '", tmp.string(), "' to '", file.string(),
           "': ", ec.message());
}

}  // namespace mf::npy
