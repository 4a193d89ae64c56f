#pragma once
// Runs the built `mf` binary (MF_BINARY) with arguments and captures exit code, stdout and stderr,
// so CLI tests check what a user sees.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace mf::testing {

struct MfRun {
  int code = -1;
  std::string out;
  std::string err;
};

inline std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// `env` ("NAME=value ...", may be empty) is set for the child only.
inline MfRun run_mf_with_env(const std::string& env, const std::string& args) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("mf_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto out = dir / "out.txt";
  const auto err = dir / "err.txt";
  const std::string command = (env.empty() ? "" : "env " + env + " ") + std::string(MF_BINARY) +
                              " " + args + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(command.c_str());
  MfRun run;
  run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = slurp(out);
  run.err = slurp(err);
  return run;
}

inline MfRun run_mf(const std::string& args) {
  return run_mf_with_env("", args);
}

}  // namespace mf::testing
