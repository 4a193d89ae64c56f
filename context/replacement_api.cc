#include "context/replacement_api.h"

#include <cstdlib>

#include "base/error.h"
#include "context/context.h"
#include "context/store.h"
#include "context/value_parsing.h"

namespace mf {
namespace {

using context::Json;
using context::detail::PendingWarning;
using context::detail::State;

// Sets `values` (key -> value) through `api` as one all-or-nothing change.
void set_through(std::string_view api, const Json& values) {
  context::detail::update_state([&](State& state, std::vector<PendingWarning>& warnings) {
    for (const auto& [key, value] : values.items()) {
      context::detail::set_context_key(state, api, key, value, warnings);
    }
  });
}

// A variable the environment pins: set through it, then held against set_context.
void pin(std::string_view variable, const std::string& key, const Json& value) {
  context::detail::update_state([&](State& state, std::vector<PendingWarning>& warnings) {
    state.pinned.erase(key);
    context::detail::set_context_key(state, variable, key, value, warnings);
    state.pinned[key] = {{"by", std::string(variable)}, {"value", state.values[key]}};
  });
}

int flag_of(const char* variable, std::string_view text, int max) {
  MF_CHECK(text.size() == 1 && text[0] >= '0' && text[0] - '0' <= max, InvalidArgument,
           "environment variable ", variable, "='", echo(text),
           "' is not valid; use a digit from 0 to ", max);
  return text[0] - '0';
}

}  // namespace

void set_device(std::string_view device_target, std::optional<int> device_id) {
  Json values = {{"device_target", std::string(device_target)}};
  if (device_id) values["device_id"] = *device_id;
  set_through("set_device", values);
}

void set_deterministic(bool deterministic) {
  set_through("set_deterministic", {{"deterministic", deterministic ? "ON" : "OFF"}});
}

void set_recursion_limit(int recursion_limit) {
  set_through("set_recursion_limit", {{"max_call_depth", recursion_limit}});
}

namespace context::runtime {

void set_memory(std::string_view init_size, std::string_view increase_size,
                std::string_view max_size, std::string_view optimize_level,
                std::string_view huge_page_reserve_size) {
  const auto or_default = [](std::string_view given, std::string_view fallback) {
    return std::string(given.empty() ? fallback : given);
  };
  // Checked as sizes, like MindSpore; neither has anything to act on here. A huge-page reserve
  // may be 0GB (none, its default).
  const context::KeySpec* size = context::find_key(context::context_keys(), "max_device_memory");
  context::normalize_value("runtime.set_memory", *size, or_default(init_size, "2GB"), "init_size");
  const std::string reserve = or_default(huge_page_reserve_size, "0GB");
  if (reserve != "0GB") {
    context::normalize_value("runtime.set_memory", *size, reserve, "huge_page_reserve_size");
  }
  set_through("runtime.set_memory", {{"mempool_block_size", or_default(increase_size, "2GB")},
                                     {"max_device_memory", or_default(max_size, "1024GB")},
                                     {"memory_optimize_level", or_default(optimize_level, "O0")}});
}

void launch_blocking() {
  set_through("runtime.launch_blocking", {{"pynative_synchronize", true}});
}

void dispatch_threads_num(int num_threads) {
  set_through("runtime.dispatch_threads_num", {{"inter_op_parallel_num", num_threads}});
}

}  // namespace context::runtime

namespace context::device_context::cpu::op_tuning {
void threads_num(int num_threads) {
  set_through("device_context.cpu.op_tuning.threads_num", {{"runtime_num_threads", num_threads}});
}
}  // namespace context::device_context::cpu::op_tuning

void configure_from_environment(const std::function<const char*(const char*)>& getenv) {
  const auto read = [&](const char* name) -> std::optional<std::string> {
    const char* value = getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
  // Below set_context: applied as ordinary values a later set_context overrides.
  const bool cache_forced =
      read("MS_COMPILER_CACHE_ENABLE") &&
      flag_of("MS_COMPILER_CACHE_ENABLE", *read("MS_COMPILER_CACHE_ENABLE"), 1) == 1;
  if (read("MS_COMPILER_CACHE_ENABLE") && !cache_forced) {
    set_through("MS_COMPILER_CACHE_ENABLE", {{"enable_compile_cache", false}});
  }
  if (auto v = read("MS_COMPILER_CACHE_PATH")) {
    set_through("MS_COMPILER_CACHE_PATH", {{"compile_cache_path", *v}});
  }
  // Above set_context. A variable no longer set releases its key (set_context may set it again).
  context::detail::update_state([&](State& state, std::vector<PendingWarning>&) {
    for (const char* variable :
         {"MS_DEV_SAVE_GRAPHS", "MS_DEV_SAVE_GRAPHS_PATH", "MS_DEV_PRECOMPILE_ONLY",
          "MS_DEV_GRAPH_KERNEL_FLAGS", "MS_COMPILER_CACHE_ENABLE"}) {
      const bool pins = std::string_view(variable) == "MS_COMPILER_CACHE_ENABLE"
                            ? cache_forced
                            : read(variable).has_value();
      if (pins) continue;
      for (auto it = state.pinned.begin(); it != state.pinned.end();) {
        it = (*it)["by"] == variable ? state.pinned.erase(it) : std::next(it);
      }
    }
  });
  if (auto v = read("MS_DEV_SAVE_GRAPHS")) {
    pin("MS_DEV_SAVE_GRAPHS", "save_graphs", flag_of("MS_DEV_SAVE_GRAPHS", *v, 3));
  }
  if (auto v = read("MS_DEV_SAVE_GRAPHS_PATH"))
    pin("MS_DEV_SAVE_GRAPHS_PATH", "save_graphs_path", *v);
  if (auto v = read("MS_DEV_PRECOMPILE_ONLY")) {
    pin("MS_DEV_PRECOMPILE_ONLY", "precompile_only", flag_of("MS_DEV_PRECOMPILE_ONLY", *v, 1) == 1);
  }
  // MindSpore: the variable's flags win over graph_kernel_flags from set_context or a JitConfig.
  if (auto v = read("MS_DEV_GRAPH_KERNEL_FLAGS")) {
    pin("MS_DEV_GRAPH_KERNEL_FLAGS", "graph_kernel_flags", *v);
  }
  // MindSpore ORs MS_COMPILER_CACHE_ENABLE=1 with enable_compile_cache: on, set_context cannot
  // turn the cache off.
  if (cache_forced) pin("MS_COMPILER_CACHE_ENABLE", "enable_compile_cache", true);
}

}  // namespace mf
