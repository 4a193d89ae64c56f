#include "engine/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/file_reader.h"

namespace mf::data {
namespace {

constexpr std::string_view kWhat = "IDX file";
// Deflate cannot expand data by more than about 1032:1 (zlib's FAQ); a header declaring more than
// that from the compressed size is a lie, refused before anything is allocated.
constexpr uint64_t kMaxDeflateRatio = 1032;
// The payload is read in chunks this large, so a header that lies within the bounds still costs
// at most one chunk beyond the data actually present.
constexpr size_t kReadChunk = size_t{16} << 20;

std::string where(const std::filesystem::path& file) {
  return std::string(kWhat) + " '" + echo(file.string()) + "'";
}

std::string hex_byte(uint8_t b) {
  constexpr char kDigits[] = "0123456789abcdef";
  return {kDigits[b >> 4], kDigits[b & 15]};
}

// A stream of the file's (decompressed) bytes.
class Source {
 public:
  virtual ~Source() = default;
  // Up to n bytes; fewer only at the end of the data.
  virtual size_t read(void* out, size_t n) = 0;
  // Called once everything declared (and one byte more) was read: throws if anything follows.
  virtual void check_end() {}
};

class RawSource : public Source {
 public:
  explicit RawSource(RegularFile& file) : file_(file) {}
  size_t read(void* out, size_t n) override {
    size_t got = 0;
    while (got < n) {
      const size_t r = file_.read(static_cast<uint8_t*>(out) + got, n - got);
      if (r == 0) break;
      got += r;
    }
    return got;
  }

 private:
  RegularFile& file_;
};

// A gzip member inflated as it is read. Corrupt data, a stream that ends before its trailer (the
// CRC-32 and length that zlib checks) and bytes after it are DataLoss.
class GzipSource : public Source {
 public:
  GzipSource(RegularFile& file, const std::filesystem::path& path) : file_(file), path_(path) {
    // 16 + 15: a gzip header and trailer around a deflate stream with the largest window.
    const int rc = inflateInit2(&zs_, 16 + MAX_WBITS);
    MF_CHECK(rc == Z_OK, OutOfMemory, "cannot start decompressing ", where(path_), ": zlib error ",
             rc);
  }
  ~GzipSource() override { inflateEnd(&zs_); }

  size_t read(void* out, size_t n) override {
    size_t got = 0;
    while (got < n && !ended_) {
      if (zs_.avail_in == 0 && !file_eof_) refill();
      const size_t want = std::min<size_t>(n - got, std::numeric_limits<uInt>::max() / 2);
      zs_.next_out = static_cast<Bytef*>(out) + got;
      zs_.avail_out = static_cast<uInt>(want);
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      const size_t produced = want - zs_.avail_out;
      got += produced;
      if (rc == Z_STREAM_END) {
        ended_ = true;
      } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
        // No progress and no input left: the compressed data ran out before the stream's end.
        MF_CHECK(produced != 0 || zs_.avail_in != 0 || !file_eof_, DataLoss, where(path_),
                 ": the gzip stream ends early (the file is truncated); reinstall or download "
                 "it again");
      } else if (rc == Z_MEM_ERROR) {
        MF_FAIL(OutOfMemory, "out of memory decompressing ", where(path_));
      } else {
        MF_FAIL(DataLoss, where(path_), ": corrupt gzip data (",
                echo(zs_.msg != nullptr ? zs_.msg : "invalid stream"), ")");
      }
    }
    return got;
  }

  void check_end() override {
    // The declared payload is read; the member must end here, with nothing after it.
    if (!ended_) {
      uint8_t extra = 0;
      const size_t got = read(&extra, 1);
      MF_CHECK(got == 0, DataLoss, where(path_), ": holds more data than its header declares");
    }
    if (zs_.avail_in == 0 && !file_eof_) refill();
    MF_CHECK(zs_.avail_in == 0, DataLoss, where(path_),
             ": unexpected bytes after the gzip stream (concatenated or damaged file)");
  }

 private:
  void refill() {
    const size_t r = file_.read(in_.data(), in_.size());
    if (r == 0) file_eof_ = true;
    zs_.next_in = in_.data();
    zs_.avail_in = static_cast<uInt>(r);
  }

  RegularFile& file_;
  const std::filesystem::path& path_;
  z_stream zs_{};
  std::array<Bytef, 1 << 16> in_{};
  bool file_eof_ = false;
  bool ended_ = false;
};

bool known_type(uint8_t code) {
  switch (static_cast<IdxType>(code)) {
    case IdxType::kUInt8:
    case IdxType::kInt8:
    case IdxType::kInt16:
    case IdxType::kInt32:
    case IdxType::kFloat32:
    case IdxType::kFloat64:
      return true;
  }
  return false;
}

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Big-endian elements to this machine's order, and back (the same swap).
void swap_elements(uint8_t* bytes, size_t count, size_t width) {
  if (width == 1 || std::endian::native == std::endian::big) return;
  for (size_t i = 0; i < count; ++i) std::reverse(bytes + i * width, bytes + (i + 1) * width);
}

}  // namespace

size_t idx_type_size(IdxType type) {
  switch (type) {
    case IdxType::kUInt8:
    case IdxType::kInt8:
      return 1;
    case IdxType::kInt16:
      return 2;
    case IdxType::kInt32:
    case IdxType::kFloat32:
      return 4;
    case IdxType::kFloat64:
      return 8;
  }
  MF_FAIL(Internal, "unknown IDX type code ", int(type));
}

std::string_view idx_type_name(IdxType type) {
  switch (type) {
    case IdxType::kUInt8:
      return "uint8";
    case IdxType::kInt8:
      return "int8";
    case IdxType::kInt16:
      return "int16";
    case IdxType::kInt32:
      return "int32";
    case IdxType::kFloat32:
      return "float32";
    case IdxType::kFloat64:
      return "float64";
  }
  return "unknown";
}

IdxArray read_idx(const std::filesystem::path& file, uint64_t max_payload_bytes) {
  RegularFile in(file, kWhat);
  uint8_t sniff[2] = {0, 0};
  const size_t sniffed = in.read_at(0, sniff, 2);
  const bool gzip = sniffed == 2 && sniff[0] == 0x1f && sniff[1] == 0x8b;
  std::unique_ptr<Source> source;
  if (gzip) {
    source = std::make_unique<GzipSource>(in, file);
  } else {
    source = std::make_unique<RawSource>(in);
  }

  // The magic: two zero bytes, the element type, the rank.
  uint8_t magic[4] = {};
  const size_t got_magic = source->read(magic, 4);
  MF_CHECK(got_magic == 4, DataLoss, where(file), ": too short for an IDX header (", got_magic,
           " bytes; an IDX file starts with 4 magic bytes)");
  MF_CHECK(magic[0] == 0 && magic[1] == 0, DataLoss, where(file), ": not an IDX file (magic ",
           hex_byte(magic[0]), " ", hex_byte(magic[1]), " ", hex_byte(magic[2]), " ",
           hex_byte(magic[3]), "; IDX files start with 00 00)");
  MF_CHECK(
      known_type(magic[2]), DataLoss, where(file), ": unknown element type code 0x",
      hex_byte(magic[2]),
      " (IDX knows 0x08 uint8, 0x09 int8, 0x0b int16, 0x0c int32, 0x0d float32, 0x0e float64)");
  const int64_t rank = magic[3];
  MF_CHECK(rank >= 1 && rank <= ir::kMaxRank, DataLoss, where(file), ": rank ", rank,
           " is not between 1 and ", ir::kMaxRank);

  IdxArray array;
  array.type = static_cast<IdxType>(magic[2]);
  std::vector<uint8_t> dims(size_t(rank) * 4);
  const size_t got_dims = source->read(dims.data(), dims.size());
  MF_CHECK(got_dims == dims.size(), DataLoss, where(file), ": the header ends after ", got_dims,
           " of its ", dims.size(), " dimension bytes (the file is truncated)");
  int64_t elements = 1;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t dim = load_be32(dims.data() + i * 4);
    array.shape.push_back(dim);
    const auto product = ir::checked_mul(elements, dim);
    MF_CHECK(product.has_value() && *product <= ir::kMaxTensorElements, DataLoss, where(file),
             ": dimensions ", ir::shape_to_string(array.shape),
             "... describe more elements than any tensor may hold (", ir::kMaxTensorElements, ")");
    elements = *product;
  }
  const size_t width = idx_type_size(array.type);
  const uint64_t payload = uint64_t(elements) * width;  // <= 2^43: no overflow
  MF_CHECK(payload <= max_payload_bytes, InvalidArgument, where(file), ": shape ",
           ir::shape_to_string(array.shape), " of ", idx_type_name(array.type), " is ", payload,
           " bytes, more than the limit of ", max_payload_bytes, " bytes");

  const uint64_t header = 4 + uint64_t(rank) * 4;
  if (gzip) {
    MF_CHECK(payload <= in.size() * kMaxDeflateRatio + 1024, DataLoss, where(file),
             ": its header declares ", payload, " bytes of data, more than its ", in.size(),
             " compressed bytes can hold (the header is damaged)");
  } else {
    MF_CHECK(in.size() >= header + payload, DataLoss, where(file), ": truncated: shape ",
             ir::shape_to_string(array.shape), " of ", idx_type_name(array.type), " needs ",
             payload, " bytes of data after the header, the file holds ", in.size() - header);
    MF_CHECK(in.size() == header + payload, DataLoss, where(file), ": ",
             in.size() - header - payload, " bytes after the data its header declares (shape ",
             ir::shape_to_string(array.shape), ")");
  }

  // Grown chunk by chunk: a lying gzip header costs at most one chunk beyond the real data.
  uint64_t done = 0;
  while (done < payload) {
    const size_t step = size_t(std::min<uint64_t>(payload - done, kReadChunk));
    array.bytes.resize(size_t(done) + step);
    const size_t got = source->read(array.bytes.data() + done, step);
    MF_CHECK(got == step, DataLoss, where(file), ": truncated: its header declares ", payload,
             " bytes of data (shape ", ir::shape_to_string(array.shape), "), the file holds ",
             done + got);
    done += got;
  }
  source->check_end();
  swap_elements(array.bytes.data(), size_t(elements), width);
  return array;
}

std::vector<uint8_t> encode_idx(IdxType type, const ir::Shape& shape, const void* host_order_data) {
  MF_CHECK(!shape.empty() && int64_t(shape.size()) <= ir::kMaxRank, InvalidArgument,
           "encode_idx: rank ", shape.size(), " is not between 1 and ", ir::kMaxRank);
  const size_t width = idx_type_size(type);
  const auto elements = size_t(ir::checked_num_elements(shape, "encode_idx"));
  std::vector<uint8_t> out = {0, 0, uint8_t(type), uint8_t(shape.size())};
  for (const int64_t dim : shape) {
    MF_CHECK(dim >= 0 && dim <= int64_t{std::numeric_limits<uint32_t>::max()}, InvalidArgument,
             "encode_idx: dimension ", dim, " does not fit the format's uint32");
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(uint64_t(dim) >> shift));
  }
  const size_t header = out.size();
  out.resize(header + elements * width);
  if (elements > 0) std::memcpy(out.data() + header, host_order_data, elements * width);
  swap_elements(out.data() + header, elements, width);
  return out;
}

std::vector<uint8_t> gzip_compress(std::span<const uint8_t> bytes) {
  // One deflate call: zlib counts in 32-bit uInt.
  MF_CHECK(bytes.size() < (size_t{1} << 31), InvalidArgument, "gzip_compress: ", bytes.size(),
           " bytes is more than this helper compresses at once (2 GiB)");
  z_stream zs{};
  MF_CHECK(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                        Z_DEFAULT_STRATEGY) == Z_OK,
           OutOfMemory, "gzip_compress: cannot start zlib");
  std::vector<uint8_t> out(deflateBound(&zs, uLong(bytes.size())) + 32);
  zs.next_in = const_cast<Bytef*>(bytes.data());
  zs.avail_in = uInt(bytes.size());
  zs.next_out = out.data();
  zs.avail_out = uInt(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  MF_CHECK(rc == Z_STREAM_END, Internal, "gzip_compress: zlib returned ", rc);
  return out;
}

}  // namespace mf::data
