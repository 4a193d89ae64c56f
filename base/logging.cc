#include "base/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <string>

#include "base/error.h"

namespace mf::log {

spdlog::logger& logger() {
  static std::shared_ptr<spdlog::logger> instance = [] {
    auto created = spdlog::stderr_color_mt("modeflow");
    created->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] %v");
    created->set_level(spdlog::level::warn);
    return created;
  }();
  return *instance;
}

spdlog::level::level_enum parse_level(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (lower == "warning") lower = "warn";
  static constexpr std::string_view kNames[] = {"trace", "debug",    "info", "warn",
                                                "error", "critical", "off"};
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (lower == kNames[i]) return static_cast<spdlog::level::level_enum>(i);
  }
  MF_FAIL(InvalidArgument, "log level '", name,
          "' is not recognized; use one of trace, debug, info, warn, error, critical, off");
}

void set_level(spdlog::level::level_enum level) {
  logger().set_level(level);
}

void warn_once(std::string_view key, std::string_view message) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> seen;
  {
    std::lock_guard lock(mutex);
    if (!seen.emplace(key).second) return;
  }
  logger().warn("{}", message);
}

}  // namespace mf::log
