#include "engine/io/npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "base/file_reader.h"

namespace mf::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// numpy writes headers of a few hundred bytes; anything far larger is damage.
constexpr size_t kMaxHeaderBytes = size_t{1} << 16;

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

// The header dict, parsed by the format's own grammar (a Python dict literal written by
// numpy.lib.format): "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", then spaces
// and one '\n'. Exactly the three keys, each once; shape a tuple of decimal non-negative integers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::filesystem::path& file)
      : text_(text), file_(file) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    ir::Shape shape;
  };

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_spaces();
    expect('{');
    skip_spaces();
    while (!accept('}')) {
      const std::string key = string_literal();
      skip_spaces();
      expect(':');
      skip_spaces();
      if (key == "descr") {
        check_once(have_descr, key);
        h.descr = string_literal();
      } else if (key == "fortran_order") {
        check_once(have_order, key);
        if (accept_word("True")) {
          h.fortran_order = true;
        } else if (accept_word("False")) {
          h.fortran_order = false;
        } else {
          fail("'fortran_order' must be True or False");
        }
      } else if (key == "shape") {
        check_once(have_shape, key);
        h.shape = shape_tuple();
      } else {
        fail("unexpected key '" + echo(key, 40) +
             "' (a .npy header has exactly 'descr', 'fortran_order' and 'shape')");
      }
      skip_spaces();
      if (accept(',')) {
        skip_spaces();
        continue;
      }
      skip_spaces();
      if (peek() != '}') fail("expected ',' or '}'");
    }
    if (!have_descr || !have_order || !have_shape) {
      fail(std::string("the '") +
           (!have_descr   ? "descr"
            : !have_order ? "fortran_order"
                          : "shape") +
           "' entry is missing");
    }
    // numpy pads with spaces and ends the header with '\n'.
    while (pos_ < text_.size() && text_[pos_] == ' ') ++pos_;
    if (pos_ + 1 != text_.size() || text_[pos_] != '\n') {
      fail("the dict must be followed only by spaces and one '\\n'");
    }
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    MF_FAIL(DataLoss, echo(file_.string()), ": malformed .npy header at byte ", pos_, ": ", why,
            "; header: ", echo(text_, 200));
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool accept(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  bool accept_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  void skip_spaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  void check_once(bool& seen, const std::string& key) {
    if (seen) fail("the key '" + key + "' appears twice");
    seen = true;
  }
  // 'text' or "text"; no escapes (no header value needs one).
  std::string string_literal() {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    ++pos_;
    const size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) fail("a string is not closed");
    const std::string_view value = text_.substr(pos_, end - pos_);
    if (value.find('\\') != std::string_view::npos || value.find('\n') != std::string_view::npos) {
      fail("a string holds an escape or a newline");
    }
    pos_ = end + 1;
    return std::string(value);
  }
  // "()", "(3,)", "(2, 3)", "(2, 3,)": decimal integers, no sign, no leading zeros, no hex.
  ir::Shape shape_tuple() {
    expect('(');
    ir::Shape shape;
    bool trailing_comma = false;
    skip_spaces();
    while (!accept(')')) {
      const size_t begin = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      const std::string_view digits = text_.substr(begin, pos_ - begin);
      if (digits.empty()) fail("expected a decimal dimension in the shape");
      if (digits.size() > 1 && digits[0] == '0') fail("a dimension has a leading zero");
      if (digits.size() > 18) fail("a dimension is larger than 2^40");
      int64_t dim = 0;
      for (char c : digits) dim = dim * 10 + (c - '0');
      if (static_cast<int64_t>(shape.size()) >= ir::kMaxRank) {
        fail("the shape has more than " + std::to_string(ir::kMaxRank) + " axes");
      }
      shape.push_back(dim);
      skip_spaces();
      trailing_comma = accept(',');
      skip_spaces();
      if (!trailing_comma && peek() != ')') fail("expected ',' or ')' in the shape");
    }
    // Python: "(3)" is the integer 3, not a tuple.
    if (shape.size() == 1 && !trailing_comma) fail("a 1-D shape is written (n,)");
    return shape;
  }

  std::string_view text_;
  const std::filesystem::path& file_;
  size_t pos_ = 0;
};

}  // namespace

std::string descr_of(ir::DType dtype) {
  for (const auto& entry : kDescrs) {
    if (entry.dtype == dtype) return std::string(entry.descr);
  }
  MF_FAIL(Internal, "no .npy descr for dtype ", ir::dtype_name(dtype));
}

Array load(const std::filesystem::path& file) {
  // A FIFO, a device or a directory is refused without blocking. The header is read first and the
  // file's size checked against what it declares, so a damaged or hostile file of gigabytes is
  // refused without reading them, and the data is read once, straight into the array.
  RegularFile in(file, ".npy file");
  const std::string name = echo(file.string());
  std::string head(std::min<uint64_t>(in.size(), kMagicSize + 2 + 4 + kMaxHeaderBytes), '\0');
  head.resize(in.read(head.data(), head.size()));
  const std::string_view bytes(head);
  MF_CHECK(bytes.size() >= kMagicSize && bytes.substr(0, kMagicSize) == std::string_view(kMagic),
           DataLoss, name, ": not a .npy file (the magic string \\x93NUMPY is missing)");
  MF_CHECK(bytes.size() >= kMagicSize + 2, DataLoss, name,
           ": .npy file is truncated in its version");
  const auto major = uint8_t(bytes[kMagicSize]), minor = uint8_t(bytes[kMagicSize + 1]);
  MF_CHECK(major >= 1 && major <= 3 && minor == 0, DataLoss, name,
           ": unsupported .npy format version ", int(major), ".", int(minor),
           " (1.0, 2.0 and 3.0 are read)");
  const size_t len_size = major == 1 ? 2 : 4;
  size_t at = kMagicSize + 2;
  MF_CHECK(bytes.size() >= at + len_size, DataLoss, name,
           ": .npy file is truncated in its header length");
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_size; ++i) header_len |= uint64_t(uint8_t(bytes[at + i])) << (8 * i);
  at += len_size;
  MF_CHECK(header_len <= kMaxHeaderBytes, DataLoss, name, ": .npy header length ", header_len,
           " is implausible (at most ", kMaxHeaderBytes, ")");
  MF_CHECK(bytes.size() >= at + header_len, DataLoss, name,
           ": .npy file is truncated in its header (", header_len, " bytes declared, ",
           bytes.size() - at, " present)");
  const auto header = HeaderParser(bytes.substr(at, header_len), file).parse();
  at += header_len;

  Array array;
  bool known = false;
  for (const auto& entry : kDescrs) {
    if (entry.descr == header.descr || (header.descr == "<b1" && entry.dtype == ir::DType::kBool)) {
      array.dtype = entry.dtype;
      known = true;
    }
  }
  MF_CHECK(known, InvalidArgument, name, ": .npy dtype '", echo(header.descr, 40),
           "' is not supported; use float32 (<f4), float64 (<f8), int32 (<i4), int64 (<i8) or bool "
           "(|b1)");
  MF_CHECK(!header.fortran_order, InvalidArgument, name,
           ": Fortran-ordered .npy arrays are not supported; save with np.ascontiguousarray first");
  array.shape = header.shape;
  MF_CHECK(ir::try_num_elements(array.shape).has_value(), DataLoss, name, ": .npy shape ",
           ir::shape_to_string(array.shape),
           " has more than 2^40 elements, the largest tensor supported: the file is damaged");
  const uint64_t expected = uint64_t(ir::num_elements(array.shape)) * ir::dtype_size(array.dtype);
  const uint64_t present = in.size() - at;
  MF_CHECK(present >= expected, DataLoss, name, ": .npy data is truncated: expected ", expected,
           " bytes for shape ", ir::shape_to_string(array.shape), ", found ", present);
  MF_CHECK(present == expected, DataLoss, name, ": .npy file has ", present - expected,
           " bytes after the ", expected, " bytes of data for shape ",
           ir::shape_to_string(array.shape), ": the header or the data is damaged");
  array.bytes.resize(size_t(expected));
  const size_t from_head = std::min<size_t>(bytes.size() - at, size_t(expected));
  if (from_head > 0) std::memcpy(array.bytes.data(), bytes.data() + at, from_head);
  const size_t rest = in.read(array.bytes.data() + from_head, size_t(expected) - from_head);
  MF_CHECK(from_head + rest == expected, DataLoss, name,
           ": .npy file shrank while it was read; write it again");
  if (array.dtype == ir::DType::kBool) {
    for (uint8_t b : array.bytes) {
      MF_CHECK(b <= 1, DataLoss, name, ": a bool .npy array holds a byte other than 0 or 1");
    }
  }
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

  std::string out;
  const size_t data_bytes =
      size_t(ir::checked_byte_size(shape, ir::dtype_size(dtype), "npy::save"));
  out.reserve(kMagicSize + 4 + header.size() + data_bytes);
  out.append(kMagic, kMagicSize);
  out.push_back(char(1));
  out.push_back(char(0));
  const uint16_t len = uint16_t(header.size());
  out.push_back(char(len & 0xff));
  out.push_back(char(len >> 8));
  out += header;
  out.append(static_cast<const char*>(data), data_bytes);
  // A unique temporary name (pid + counter), every write checked, then one rename: two runs
  // writing one --output-dir never collide, and a full disk is an error.
  write_file_atomically(file, out, ".npy file");
}

}  // namespace mf::npy
