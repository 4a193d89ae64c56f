#pragma once
// Reading and writing files safely whatever the path names. Every reader of user-supplied files
// (IR text, ONNX models, JSON documents, .npy arrays, compile-cache entries, print files) goes
// through read_regular_file: it opens without blocking (a FIFO never hangs the process), accepts
// only regular files (/dev/zero, a directory or a socket is an error, not an endless read) and
// reads at most a bound. Writers use write_file_atomically: a unique temporary name in the target's
// directory, every write checked (a full disk or /dev/full is an error, not lost output), then one
// rename.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace mf {

// Default bounds: text and JSON documents, and binary models/arrays/entries.
inline constexpr size_t kMaxTextFileBytes = size_t{256} << 20;   // 256 MiB
inline constexpr size_t kMaxBinaryFileBytes = size_t{16} << 30;  // 16 GiB

// The whole content of `path`. `what` names the file in messages ("IR file", "context file").
// NotFound when it does not exist or cannot be opened; InvalidArgument when it is not a regular
// file ("... is a FIFO, not a regular file") or holds more than max_bytes; DataLoss when reading
// fails part way.
std::string read_regular_file(const std::filesystem::path& path, size_t max_bytes,
                              std::string_view what);

// A regular file opened for reading in parts, for readers that check a header before they read
// the rest (a .npy header declares the data's size: a file of the wrong size is refused before its
// gigabytes are read). Opens and checks as read_regular_file does (without the size bound).
class RegularFile {
 public:
  RegularFile(const std::filesystem::path& path, std::string_view what);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  // The size fstat reported when the file was opened.
  uint64_t size() const { return size_; }
  // Reads up to `n` bytes at the current position into `out`; returns how many were read (fewer
  // only at the end of the file). DataLoss when reading fails.
  size_t read(void* out, size_t n);
  // Reads up to `n` bytes at `offset` (the position is unchanged); fewer only at the end.
  size_t read_at(uint64_t offset, void* out, size_t n);

 private:
  std::filesystem::path path_;
  std::string what_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Throws as read_regular_file would when `path` exists but is not a regular file; never blocks
// (lstat-free: follows symlinks, as open does). Returns false when it does not exist.
bool check_regular_file(const std::filesystem::path& path, std::string_view what);

// Writes `bytes` to `path` atomically: to a temporary file named after `path`, the pid and a
// process-wide counter (so two processes or threads writing one directory never collide), checking
// every write and the close, then renamed over `path`. A failure removes the temporary file and
// throws InvalidArgument naming `what`, the path and the system's reason.
void write_file_atomically(const std::filesystem::path& path, std::string_view bytes,
                           std::string_view what);

// A unique temporary name next to `path`: "<path>.tmp.<pid>.<counter>".
std::filesystem::path unique_temp_path(const std::filesystem::path& path);

}  // namespace mf
