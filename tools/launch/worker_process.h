#pragma once
// Starting one worker of `mf launch`, and the words for how it ended. A worker runs in its own
// process group, so a signal sent to the group also reaches the processes it starts; it reads
// /dev/null (a background group reading the terminal would stop) and writes its stdout and stderr
// into one pipe that the launcher reads.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "tools/launch/unique_fd.h"

namespace mf::tools::launch {

struct WorkerProcess {
  pid_t pid = -1;   // also the id of its process group
  UniqueFd output;  // the read end of its stdout+stderr pipe: non-blocking, close-on-exec
};

// Starts `argv` with exactly `env` (NAME=value entries) as its environment. When exec fails, the
// child writes "mf launch: cannot execute '...': <reason>" into its pipe and exits 127, so the
// launcher reports it as any other failed worker. Throws mf::Error when no pipe or process can be
// made.
WorkerProcess start_worker(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env);

// The launcher's environment with each NAME=value of `overrides` in place of NAME's own value.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides);

// Why execvp could not run `program` (searched in PATH when it holds no '/'), or nullopt when it
// can: a misspelt command is refused before any worker starts.
std::optional<std::string> why_not_executable(const std::string& program);

// "exited with status 3", "was killed by signal 9 (SIGKILL)", from a waitpid status.
std::string describe_exit(int wait_status);

// "SIGTERM"; "signal 40" for a signal without a name.
std::string signal_name(int sig);

}  // namespace mf::tools::launch
