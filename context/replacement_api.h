#pragma once
// MindSpore 2.5+'s replacements for set_context keys, for users coming from current MindSpore.
// Each sets the same key of the one key table (context/key_table.cc), with the same checks, and
// records which function set it, so `mf context explain` can say so.
//
//   mindspore.set_device(target, device_id)          -> device_target, device_id
//   mindspore.set_deterministic(bool)                -> deterministic
//   mindspore.set_recursion_limit(n)                 -> max_call_depth
//   mindspore.runtime.set_memory(...)                -> max_device_memory, mempool_block_size
//                                                       (increase_size), memory_optimize_level
//   mindspore.runtime.launch_blocking()              -> pynative_synchronize=true
//   mindspore.runtime.dispatch_threads_num(n)        -> inter_op_parallel_num
//   mindspore.device_context.cpu.op_tuning.threads_num(n) -> runtime_num_threads

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mf {

void set_device(std::string_view device_target, std::optional<int> device_id = std::nullopt);
void set_deterministic(bool deterministic);
void set_recursion_limit(int recursion_limit = 1000);

// Reads MindSpore's environment variables once, at start-up (`mf` calls it; a program using the
// library calls it itself, and `import modeflow` does: the engine never reads the environment).
// With MindSpore's precedence:
//   MS_DEV_SAVE_GRAPHS (0..3), MS_DEV_SAVE_GRAPHS_PATH, MS_DEV_PRECOMPILE_ONLY (0/1),
//     MS_DEV_GRAPH_KERNEL_FLAGS, MS_COMPILER_CACHE_ENABLE=1: win over set_context, which then
//     warns and keeps the environment's value (the cache variable is ORed with the key);
//   MS_COMPILER_CACHE_ENABLE=0, MS_COMPILER_CACHE_PATH: below set_context, which overrides them.
// A bad value is an InvalidArgument naming the variable. `getenv` is injectable for tests.
void configure_from_environment(const std::function<const char*(const char*)>& getenv =
                                    [](const char* name) {
                                      return static_cast<const char*>(std::getenv(name));
                                    });

namespace context::runtime {
// MindSpore 2.6's runtime.set_memory: every argument left out takes its default again (increase
// 2GB, max 1024GB, optimize_level O0), as MindSpore's does; an empty string is the default too.
// Sizes are "xxGB". init_size and huge_page_reserve_size are checked as sizes and have nothing to
// do here: the pool grows on demand, and CPU memory has no huge-page reserve to make.
void set_memory(std::string_view init_size = "2GB", std::string_view increase_size = "2GB",
                std::string_view max_size = "1024GB", std::string_view optimize_level = "O0",
                std::string_view huge_page_reserve_size = "0GB");
void launch_blocking();
void dispatch_threads_num(int num_threads);
}  // namespace context::runtime

namespace context::device_context::cpu::op_tuning {
void threads_num(int num_threads);
}  // namespace context::device_context::cpu::op_tuning

}  // namespace mf
