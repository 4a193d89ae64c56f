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
           "environment variable ", variable, "='", text, "' is not valid; use a digit from 0 to ",
           max);
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
                std::string_view max_size, std::string_view optimize_level) {
  if (!init_size.empty()) {
    // Checked as a size, like MindSpore; the pool has nothing to reserve ahead.
    const context::KeySpec* spec = context::find_key(context::context_keys(), "max_device_memory");
    context::normalize_value("runtime.set_memory", *spec, std::string(init_size), "init_size");
  }
  Json values = Json::object();
  if (!increase_size.empty()) values["mempool_block_size"] = std::string(increase_size);
  if (!max_size.empty()) values["max_device_memory"] = std::string(max_size);
  if (!optimize_level.empty()) values["memory_optimize_level"] = std::string(optimize_level);
  set_through("runtime.set_memory", values);
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
  if (auto v = read("MS_COMPILER_CACHE_ENABLE")) {
    set_through("MS_COMPILER_CACHE_ENABLE",
                {{"enable_compile_cache", flag_of("MS_COMPILER_CACHE_ENABLE", *v, 1) == 1}});
  }
  if (auto v = read("MS_COMPILER_CACHE_PATH")) {
    set_through("MS_COMPILER_CACHE_PATH", {{"compile_cache_path", *v}});
  }
  // Above set_context. A variable no longer set releases its key (set_context may set it again).
  context::detail::update_state([&](State& state, std::vector<PendingWarning>&) {
    for (const char* variable :
         {"MS_DEV_SAVE_GRAPHS", "MS_DEV_SAVE_GRAPHS_PATH", "MS_DEV_PRECOMPILE_ONLY"}) {
      if (read(variable)) continue;
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
}

}  // namespace mf
