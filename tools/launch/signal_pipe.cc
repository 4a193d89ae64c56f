#include "tools/launch/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace mf::tools::launch {
namespace {

constexpr int kSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGPIPE};

// The handler's only state: where it writes. A handler may only make async-signal-safe calls.
volatile sig_atomic_t g_write_fd = -1;

void on_signal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  // A full pipe drops the byte: the loop is awake already and reaps every worker it finds ended.
  [[maybe_unused]] const ssize_t n = ::write(g_write_fd, &byte, 1);
  errno = saved;
}

}  // namespace

SignalPipe::SignalPipe() {
  MF_CHECK(g_write_fd == -1, Internal, "only one SignalPipe at a time");
  int ends[2];
  MF_CHECK(::pipe2(ends, O_CLOEXEC | O_NONBLOCK) == 0, InvalidArgument,
           "cannot make a pipe for signals: ", std::strerror(errno));
  read_end_ = UniqueFd(ends[0]);
  write_end_ = UniqueFd(ends[1]);
  g_write_fd = write_end_.get();
  struct sigaction action {};
  action.sa_handler = on_signal;
  ::sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  for (size_t i = 0; i < std::size(kSignals); ++i) {
    struct sigaction wanted = action;
    if (kSignals[i] == SIGPIPE) wanted.sa_handler = SIG_IGN;
    ::sigaction(kSignals[i], &wanted, &previous_[i]);
  }
}

SignalPipe::~SignalPipe() {
  for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
  g_write_fd = -1;
}

std::vector<int> SignalPipe::take() {
  std::vector<int> signals;
  unsigned char bytes[64];
  for (;;) {
    const ssize_t n = ::read(read_end_.get(), bytes, sizeof(bytes));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    signals.insert(signals.end(), bytes, bytes + n);
  }
  return signals;
}

}  // namespace mf::tools::launch
