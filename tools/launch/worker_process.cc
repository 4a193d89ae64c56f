#include "tools/launch/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/error.h"

extern char** environ;

namespace mf::tools::launch {
namespace {

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void write_all(int fd, const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(fd, text, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    left -= size_t(n);
  }
}

// The child between fork and exec: a copy of a process that may have other threads, so only
// async-signal-safe calls, on data prepared before the fork.
[[noreturn]] void become_worker(char* const* argv, char* const* envp, int input, int output,
                                pid_t launcher, const sigset_t& launcher_mask,
                                const char* cannot_execute) {
  ::setpgid(0, 0);
  // The launcher's handlers would write into its self-pipe, and an ignored SIGPIPE would be
  // inherited through exec: the worker starts with default dispositions.
  for (const int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE, SIGHUP}) ::signal(sig, SIG_DFL);
  // A launcher killed outright (it cannot forward SIGKILL) still ends its workers.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != launcher) ::_exit(128 + SIGTERM);
  ::dup2(input, STDIN_FILENO);
  ::dup2(output, STDOUT_FILENO);
  ::dup2(output, STDERR_FILENO);
  ::sigprocmask(SIG_SETMASK, &launcher_mask, nullptr);
  ::execvpe(argv[0], argv, envp);
  const char* reason = ::strerrordesc_np(errno);
  write_all(STDERR_FILENO, cannot_execute);
  write_all(STDERR_FILENO, reason != nullptr ? reason : "unknown error");
  write_all(STDERR_FILENO, "\n");
  ::_exit(127);
}

bool is_runnable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

WorkerProcess start_worker(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env) {
  MF_CHECK(!argv.empty(), Internal, "start_worker needs a command");
  const std::vector<char*> args = c_strings(argv);
  const std::vector<char*> envp = c_strings(env);
  const std::string cannot_execute = "mf launch: cannot execute '" + echo(argv.front()) + "': ";
  UniqueFd input(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  MF_CHECK(input.valid(), InvalidArgument, "cannot open /dev/null: ", std::strerror(errno));
  int ends[2];
  MF_CHECK(::pipe2(ends, O_CLOEXEC) == 0, InvalidArgument,
           "cannot make a pipe for a worker: ", std::strerror(errno));
  UniqueFd read_end(ends[0]), write_end(ends[1]);

  // Signals stay blocked across the fork, so none runs the launcher's handler in the child.
  sigset_t all, launcher_mask;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &launcher_mask);
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    become_worker(args.data(), envp.data(), input.get(), write_end.get(), launcher, launcher_mask,
                  cannot_execute.c_str());
  }
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &launcher_mask, nullptr);
  MF_CHECK(pid > 0, InvalidArgument,
           "cannot start a worker: fork failed: ", std::strerror(fork_errno));
  // Also here, not only in the child: the launcher may signal the group before the child ran.
  ::setpgid(pid, pid);
  ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
  return {pid, std::move(read_end)};
}

std::vector<std::string> environment_with(const std::vector<std::string>& overrides) {
  auto name_of = [](std::string_view entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view name = name_of(*entry);
    bool replaced = false;
    for (const std::string& o : overrides) replaced = replaced || name_of(o) == name;
    if (!replaced) env.emplace_back(*entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::optional<std::string> why_not_executable(const std::string& program) {
  if (program.empty()) return "the command is empty";
  if (program.find('/') != std::string::npos) {
    struct stat st {};
    if (::stat(program.c_str(), &st) != 0) return std::strerror(errno);
    if (!S_ISREG(st.st_mode)) return "not a regular file";
    if (::access(program.c_str(), X_OK) != 0) return std::strerror(errno);
    return std::nullopt;
  }
  // execvp's search: PATH's directories in order, an empty one meaning the current directory.
  const char* path = std::getenv("PATH");
  const std::string_view dirs = path != nullptr ? path : "/bin:/usr/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string_view dir = dirs.substr(start, end - start);
    if (is_runnable_file((dir.empty() ? std::string(".") : std::string(dir)) + "/" + program)) {
      return std::nullopt;
    }
    start = end + 1;
  }
  return "no executable of that name in PATH";
}

std::string describe_exit(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    std::string text = "was killed by signal " + std::to_string(sig);
    if (::sigabbrev_np(sig) != nullptr) text += " (" + signal_name(sig) + ")";
    if (WCOREDUMP(wait_status)) text += ", core dumped";
    return text;
  }
  return "ended with wait status " + std::to_string(wait_status);
}

std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

}  // namespace mf::tools::launch
