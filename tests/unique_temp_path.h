#pragma once
// A path under the system temp directory that no other test process or test in this process uses:
// two ctest runs on one machine (or ctest -j) must not write into each other's files.

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <string_view>

namespace mf::testing {

// temp/<stem>_<pid>_<n>: the process id separates processes, n separates calls within one.
inline std::filesystem::path unique_temp_path(std::string_view stem) {
  static std::atomic<int> counter{0};
  return std::filesystem::temp_directory_path() /
         (std::string(stem) + "_" + std::to_string(::getpid()) + "_" + std::to_string(++counter));
}

}  // namespace mf::testing
