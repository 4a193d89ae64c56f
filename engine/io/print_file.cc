#include "engine/io/print_file.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/stubs/logging.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>

#include "base/error.h"
#include "base/file_reader.h"
#include "print.pb.h"
#include "runtime/kernels/print_sink.h"
#include "version.pb.h"

namespace mf::engine {
namespace {

constexpr char kMagic[] = "modeflow-print";
constexpr uint32_t kFormatVersion = 1;

void write_delimited(std::ofstream& out, const google::protobuf::MessageLite& message,
                     const std::filesystem::path& file) {
  std::string bytes;
  message.SerializeToString(&bytes);
  std::string framed;
  {
    google::protobuf::io::StringOutputStream stream(&framed);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteVarint32(static_cast<uint32_t>(bytes.size()));
  }
  out.write(framed.data(), std::streamsize(framed.size()));
  out.write(bytes.data(), std::streamsize(bytes.size()));
  out.flush();
  // A full disk or /dev/full: the run fails instead of finishing with its prints lost.
  MF_CHECK(out.good(), InvalidArgument, "writing print file '", echo(file.string()),
           "' failed: ", std::strerror(errno), " (print_file_path)");
}

// Appends records to one file; shared by the sink for the life of the routing.
class PrintFileWriter {
 public:
  explicit PrintFileWriter(const std::filesystem::path& file)
      : file_(file), out_(file, std::ios::binary | std::ios::trunc) {
    MF_CHECK(out_.good(), InvalidArgument, "print_file_path '", echo(file_.string()),
             "' cannot be written: check that its directory exists and is writable");
    proto::FormatHeader header;
    header.set_magic(kMagic);
    header.set_format_version(kFormatVersion);
    header.set_engine_version(MODEFLOW_VERSION);
    write_delimited(out_, header, file_);
  }
  void write(std::string_view prefix, const ir::TensorView& view) {
    proto::PrintRecord record;
    record.set_prefix(std::string(prefix));
    auto* tensor = record.mutable_tensor();
    tensor->set_dtype(std::string(ir::dtype_name(view.type.dtype)));
    for (int64_t d : view.type.shape) tensor->add_shape(d);
    tensor->set_data(view.data, size_t(view.size()) * ir::dtype_size(view.type.dtype));
    std::lock_guard lock(mutex_);
    write_delimited(out_, record, file_);
  }

 private:
  std::mutex mutex_;
  std::filesystem::path file_;
  std::ofstream out_;
};

}  // namespace

namespace {
std::mutex routed_mutex;
std::string routed_path;  // the last requested destination ("" = the screen)
}  // namespace

void ensure_print_output(const std::string& path) {
  {
    std::lock_guard lock(routed_mutex);
    if (path == routed_path) return;
  }
  route_print_output(path);
}

std::filesystem::path route_print_output(const std::string& path) {
  {
    std::lock_guard lock(routed_mutex);
    routed_path = path;
  }
  if (path.empty()) {
    runtime::ops::set_print_sink({});
    return {};
  }
  std::filesystem::path file = path;
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  // A FIFO would block the open until a reader came; a device (/dev/null, /dev/full) is written in
  // place, its write errors reported; an existing regular file is kept and a new name chosen.
  MF_CHECK(status.type() != std::filesystem::file_type::fifo, InvalidArgument, "print_file_path '",
           echo(path), "' is a FIFO; name a regular file");
  MF_CHECK(status.type() != std::filesystem::file_type::directory, InvalidArgument,
           "print_file_path '", echo(path), "' is a directory; name a file in it");
  if (status.type() == std::filesystem::file_type::regular) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    file +=
        "_" + std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
  }
  auto writer = std::make_shared<PrintFileWriter>(file);
  runtime::ops::set_print_sink([writer](std::string_view prefix, const ir::TensorView& view) {
    writer->write(prefix, view);
  });
  return file;
}

std::vector<PrintedTensor> read_print_file(const std::filesystem::path& file) {
  // Only a regular file, opened without blocking, at most 2 GiB (protobuf's stream limit).
  const std::string content = read_regular_file(file, INT32_MAX, "print file");
  google::protobuf::io::ArrayInputStream stream(content.data(), static_cast<int>(content.size()));
  google::protobuf::io::CodedInputStream coded(&stream);
  const std::string name = echo(file.string());
  // Damaged bytes are reported once, as DataLoss below, not also by protobuf's own logger.
  const google::protobuf::LogSilencer quiet;
  // false at the end of the file; a length that is damaged or runs past the end is DataLoss.
  auto read_next = [&](google::protobuf::MessageLite& message, size_t index) {
    const auto at = static_cast<size_t>(coded.CurrentPosition());
    if (at == content.size()) return false;
    uint32_t size = 0;
    MF_CHECK(coded.ReadVarint32(&size), DataLoss, "print file '", name, "' is damaged at record ",
             index, ": its length field is not a valid varint");
    const size_t left = content.size() - static_cast<size_t>(coded.CurrentPosition());
    MF_CHECK(size <= left, DataLoss, "print file '", name, "' is damaged at record ", index,
             ": it declares ", size, " bytes but ", left, " remain");
    const auto limit = coded.PushLimit(static_cast<int>(size));
    MF_CHECK(message.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage(), DataLoss,
             "print file '", name, "' is damaged at record ", index,
             ": it is truncated or not a modeflow print file");
    coded.PopLimit(limit);
    return true;
  };
  proto::FormatHeader header;
  MF_CHECK(read_next(header, 0) && header.magic() == kMagic, DataLoss, "'", name,
           "' is not a modeflow print file (its header is missing)");
  MF_CHECK(header.format_version() == kFormatVersion, DataLoss, "print file '", name,
           "' has format version ", header.format_version(), "; this build reads version ",
           kFormatVersion);
  std::vector<PrintedTensor> records;
  for (size_t index = 1;; ++index) {
    proto::PrintRecord record;
    if (!read_next(record, index)) break;
    const auto dtype = ir::parse_dtype(record.tensor().dtype());
    MF_CHECK(dtype.has_value(), DataLoss, "print file '", name, "' record ", index,
             " has unknown dtype '", echo(record.tensor().dtype()), "'");
    MF_CHECK(record.tensor().shape_size() <= ir::kMaxRank, DataLoss, "print file '", name,
             "' record ", index, " has rank ", record.tensor().shape_size(), "; at most ",
             ir::kMaxRank, " axes are supported: the file is damaged");
    Shape shape(record.tensor().shape().begin(), record.tensor().shape().end());
    MF_CHECK(ir::try_num_elements(shape).has_value(), DataLoss, "print file '", name, "' record ",
             index, " declares shape ", ir::shape_to_string(shape),
             ", which has a negative dimension or more than 2^40 elements: the file is damaged");
    const size_t bytes = size_t(ir::num_elements(shape)) * ir::dtype_size(*dtype);
    MF_CHECK(record.tensor().data().size() == bytes, DataLoss, "print file '", name, "' record ",
             index, " holds ", record.tensor().data().size(), " bytes for shape ",
             ir::shape_to_string(shape), " (expected ", bytes, ")");
    if (*dtype == ir::DType::kBool) {
      for (const char byte : record.tensor().data()) {
        MF_CHECK(byte == 0 || byte == 1, DataLoss, "print file '", name, "' record ", index,
                 " holds a bool byte that is neither 0 nor 1: the file is damaged");
      }
    }
    records.push_back(
        {record.prefix(), Tensor::from_bytes(*dtype, shape, record.tensor().data().data())});
  }
  return records;
}

}  // namespace mf::engine
