#pragma once
// Logging through spdlog under one named logger ("modeflow"). The level is set once at start-up
// (tools/ reads --log-level and MF_LOG_LEVEL); library code only logs, never reads the environment.

#include <spdlog/spdlog.h>

#include <string_view>

namespace mf::log {

// The engine's logger; created on first use, writing to stderr.
spdlog::logger& logger();

// Parses "trace|debug|info|warn|error|critical|off" (case-insensitive); throws InvalidArgument
// otherwise.
spdlog::level::level_enum parse_level(std::string_view name);
void set_level(spdlog::level::level_enum level);

template <typename... Args>
void debug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().debug(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void info(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().info(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().warn(fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void error(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().error(fmt, std::forward<Args>(args)...);
}

// Warns once per distinct key for the life of the process (deprecated keys, keys without effect on
// CPU).
void warn_once(std::string_view key, std::string_view message);

}  // namespace mf::log
