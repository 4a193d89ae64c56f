#pragma once
// SIGCHLD, SIGINT and SIGTERM turned into bytes on a pipe, so the launcher's one poll() loop wakes
// when a worker ends or the launcher is interrupted, without a busy wait. SIGPIPE is ignored while
// it lives, so a closed stdout does not kill the launcher before its workers. One at a time; the
// previous dispositions come back when it is destroyed.

#include <signal.h>

#include <vector>

#include "tools/launch/unique_fd.h"

namespace mf::tools::launch {

// Installs the handlers for its lifetime. Every signal leaves a byte on the pipe; only a full pipe
// drops one, and then the loop is awake already.
class SignalPipe {
 public:
  SignalPipe();
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Readable when a signal came: for poll().
  int fd() const { return read_end_.get(); }
  // The signals received since the last call, in order of arrival.
  std::vector<int> take();

 private:
  UniqueFd read_end_, write_end_;
  struct sigaction previous_[4] = {};  // one per signal handled, in signal_pipe.cc's order
};

}  // namespace mf::tools::launch
