#pragma once
// One worker's output as the launcher keeps it: cut into lines, each line appended to the worker's
// log with one write (nothing is buffered in the launcher, so a killed launcher still leaves every
// finished line in the logs) and, with --join=true, echoed to stdout behind "[worker <rank>] ".

#include <cstdint>
#include <string>
#include <string_view>

#include "tools/launch/unique_fd.h"

namespace mf::tools::launch {

// Turns one worker's stream of bytes into whole lines in its log (and on stdout with --join). Holds
// at most 64 KiB of an unfinished line; a failed log write never throws, it is said once on stderr.
class WorkerOutput {
 public:
  WorkerOutput(UniqueFd log, std::string log_path, int64_t rank, bool join);

  // Bytes read from the worker's pipe: writes each line they complete.
  void take(std::string_view bytes);
  // At the end of the pipe: writes an unfinished last line, ended by a newline.
  void finish();
  // A line of the launcher's own about this worker (why it stopped it), into the log only.
  void note(std::string_view line);

  const std::string& log_path() const { return log_path_; }

 private:
  void write_line(std::string_view line, bool to_stdout);

  UniqueFd log_;
  std::string log_path_;
  std::string prefix_;  // "[worker 3] "
  bool join_;
  bool log_failed_ = false;  // said once, not once per line
  std::string pending_;      // the start of a line whose newline has not come yet
};

}  // namespace mf::tools::launch
