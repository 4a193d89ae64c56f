#include "base/file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace mf {
namespace {

std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

void check_mode(const std::filesystem::path& path, mode_t mode, std::string_view what) {
  MF_CHECK(S_ISREG(mode), InvalidArgument, "cannot read ", what, " '", echo(path.string()),
           "': it is ", file_kind(mode), ", not a regular file");
}

}  // namespace

bool check_regular_file(const std::filesystem::path& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  check_mode(path, st.st_mode, what);
  return true;
}

RegularFile::RegularFile(const std::filesystem::path& path, std::string_view what)
    : path_(path), what_(what) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    MF_FAIL(NotFound, "cannot read ", what, " '", echo(path.string()), "': ", std::strerror(errno));
  }
  struct stat st {};
  MF_CHECK(::fstat(fd.get(), &st) == 0, NotFound, "cannot read ", what, " '", echo(path.string()),
           "': ", std::strerror(errno));
  check_mode(path, st.st_mode, what);
  size_ = static_cast<uint64_t>(st.st_size);
  fd_ = fd.release();
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

size_t RegularFile::read(void* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::read(fd_, static_cast<char*>(out) + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    MF_CHECK(got >= 0, DataLoss, "reading ", what_, " '", echo(path_.string()),
             "' failed: ", std::strerror(errno));
    if (got == 0) break;  // the end (or the file shrank while reading: take what is there)
    done += static_cast<size_t>(got);
  }
  return done;
}

size_t RegularFile::read_at(uint64_t offset, void* out, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got =
        ::pread(fd_, static_cast<char*>(out) + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    MF_CHECK(got >= 0, DataLoss, "reading ", what_, " '", echo(path_.string()),
             "' failed: ", std::strerror(errno));
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

std::string read_regular_file(const std::filesystem::path& path, size_t max_bytes,
                              std::string_view what) {
  RegularFile file(path, what);
  MF_CHECK(file.size() <= max_bytes, InvalidArgument, "cannot read ", what, " '",
           echo(path.string()), "': it is ", file.size(), " bytes; at most ", max_bytes,
           " are read");
  std::string out(static_cast<size_t>(file.size()), '\0');
  out.resize(file.read(out.data(), out.size()));
  return out;
}

std::filesystem::path unique_temp_path(const std::filesystem::path& path) {
  static std::atomic<uint64_t> counter{0};
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  return tmp;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes,
                           std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A device or FIFO named as output (/dev/null, /dev/full, a pipe): written in place, never
    // replaced by a rename; O_NONBLOCK so a FIFO without a reader fails instead of hanging.
    MF_CHECK(!S_ISDIR(st.st_mode), InvalidArgument, "cannot write ", what, " '",
             echo(path.string()), "': it is a directory");
    Fd out(::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    MF_CHECK(out.get() >= 0, InvalidArgument, "cannot write ", what, " '", echo(path.string()),
             "': ", std::strerror(errno));
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(out.get(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      MF_CHECK(n > 0, InvalidArgument, "cannot write ", what, " '", echo(path.string()),
               "': writing failed: ", std::strerror(n < 0 ? errno : ENOSPC));
      done += static_cast<size_t>(n);
    }
    MF_CHECK(::close(out.release()) == 0, InvalidArgument, "cannot write ", what, " '",
             echo(path.string()), "': closing failed: ", std::strerror(errno));
    return;
  }
  const std::filesystem::path tmp = unique_temp_path(path);
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  MF_CHECK(fd.get() >= 0, InvalidArgument, "cannot write ", what, " '", echo(path.string()),
           "': ", std::strerror(errno), " (check that its directory exists and is writable)");
  auto fail = [&](std::string_view step, int err) {
    ::unlink(tmp.c_str());
    MF_FAIL(InvalidArgument, "cannot write ", what, " '", echo(path.string()), "': ", step,
            " failed: ", std::strerror(err));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("writing", n < 0 ? errno : ENOSPC);
    done += static_cast<size_t>(n);
  }
  if (::close(fd.release()) != 0) fail("closing", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("renaming the temporary file", errno);
}

}  // namespace mf
