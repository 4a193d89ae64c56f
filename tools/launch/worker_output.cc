#include "tools/launch/worker_output.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace mf::tools::launch {
namespace {

// A line longer than this (a progress bar redrawn with '\r', binary output) is written in pieces
// rather than held in memory until its newline comes.
constexpr size_t kMaxLine = size_t{64} << 10;

// False with errno set when the bytes could not all be written.
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      return false;
    }
    bytes.remove_prefix(size_t(n));
  }
  return true;
}

}  // namespace

WorkerOutput::WorkerOutput(UniqueFd log, std::string log_path, int64_t rank, bool join)
    : log_(std::move(log)),
      log_path_(std::move(log_path)),
      prefix_("[worker " + std::to_string(rank) + "] "),
      join_(join) {}

void WorkerOutput::take(std::string_view bytes) {
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(bytes);
      if (pending_.size() >= kMaxLine) {
        write_line(pending_, join_);
        pending_.clear();
      }
      return;
    }
    if (pending_.empty()) {
      write_line(bytes.substr(0, newline), join_);
    } else {
      pending_.append(bytes.substr(0, newline));
      write_line(pending_, join_);
      pending_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

void WorkerOutput::finish() {
  if (pending_.empty()) return;
  write_line(pending_, join_);
  pending_.clear();
}

void WorkerOutput::note(std::string_view line) {
  write_line(line, false);
}

void WorkerOutput::write_line(std::string_view line, bool to_stdout) {
  // One string for both writes: the log's line starts after the prefix.
  std::string text = prefix_;
  text.append(line).push_back('\n');
  const std::string_view logged = std::string_view(text).substr(prefix_.size());
  if (!log_failed_ && !write_all(log_.get(), logged)) {
    log_failed_ = true;
    std::fprintf(stderr, "mf launch: writing '%s' failed: %s; its later lines are lost\n",
                 echo(log_path_).c_str(), std::strerror(errno));
  }
  // stdout may be a closed pipe (SIGPIPE is ignored): the logs still have everything.
  if (to_stdout) write_all(STDOUT_FILENO, text);
}

}  // namespace mf::tools::launch
