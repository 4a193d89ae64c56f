#include "context/policy.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "base/error.h"
#include "base/logging.h"
#include "context/key_table.h"
#include "context/value_parsing.h"

namespace mf::context {
namespace {

std::string on_off(bool value) {
  return value ? "true" : "false";
}

// "key='value'" as the reasons quote settings.
std::string quoted(std::string_view key, const Json& value) {
  return std::string(key) + "=" + describe(value);
}

// " (default)" when the key still holds its default, so a reason tells set values from defaults.
// " (set by runtime.set_memory)" when a MindSpore 2.5+ function or an environment variable set it.
std::string origin(const Snapshot& snapshot, std::string_view key) {
  const KeySpec* spec = find_key(context_keys(), key);
  const std::string by = snapshot.origin(key);
  if (!by.empty() && by != kSetContextApi) return " (set by " + by + ")";
  return spec != nullptr && snapshot.values().at(spec->name) == spec->default_value ? " (default)"
                                                                                    : "";
}

std::vector<Explanation> origins_of(const Snapshot& snapshot) {
  std::vector<Explanation> out;
  for (const auto& spec : context_keys()) {
    const std::string by = snapshot.origin(spec.name);
    if (by.empty() || by == kSetContextApi) continue;
    const Json& value = snapshot.values()[spec.name];
    out.push_back({spec.name, value.is_string() ? value.get<std::string>() : value.dump(),
                   "set by " + by + (by.starts_with("MS_") ? " (environment variable)" : "()")});
  }
  return out;
}

std::string with_rank(const std::string& base, int rank) {
  return (std::filesystem::path(base) / ("rank_" + std::to_string(rank))).string();
}

Decision<JitLevel> decide_jit_level(const Snapshot& snapshot, std::optional<JitLevel> network) {
  const std::string global = snapshot.values()["jit_config"].value("jit_level", "");
  Decision<JitLevel> out;
  if (network) {
    const std::string asked =
        "the network's own JitConfig asks for " + std::string(to_string(*network));
    out = {*network, global.empty() ? asked + " (the global jit_config.jit_level is empty)"
                                    : asked + ", which beats the global jit_config.jit_level='" +
                                          global + "'"};
  } else if (!global.empty()) {
    out = {parse_jit_level(global), "jit_config.jit_level='" + global + "'"};
  } else {
    out = {JitLevel::kO0,
           "jit_config.jit_level is empty, which means O0 on CPU (O2 is chosen only on Atlas "
           "training products)"};
  }
  return out;
}

void decide_fusion(const Snapshot& snapshot, JitLevel jit, Policy& policy) {
  const std::string text = snapshot.values()["graph_kernel_flags"].get<std::string>();
  const bool enable = snapshot.values()["enable_graph_kernel"].get<bool>();
  policy.fusion_flags = parse_graph_kernel_flags(text);
  const std::string jit_name(to_string(jit));
  if (policy.fusion_flags.opt_level) {
    const int level = *policy.fusion_flags.opt_level;
    policy.fusion_level = {level, "fusion opt_level=" + std::to_string(level) +
                                      " because graph_kernel_flags='" + text +
                                      "' overrides enable_graph_kernel=" + on_off(enable) +
                                      " and jit_level=" + jit_name};
  } else if (enable) {
    policy.fusion_level = {2,
                           "fusion opt_level=2 because enable_graph_kernel=true turns fusion on "
                           "at the default opt_level 2 (graph_kernel_flags gives no --opt_level)"};
  } else if (jit != JitLevel::kO0) {
    policy.fusion_level = {2, "fusion opt_level=2 because jit_level=" + jit_name +
                                  " turns on automatic graph-kernel fusion (graph_kernel_flags "
                                  "gives no --opt_level)"};
  } else {
    policy.fusion_level = {0,
                           "fusion off: enable_graph_kernel=false, jit_level=O0 and "
                           "graph_kernel_flags gives no --opt_level"};
  }
  const int level = policy.fusion_level.value;
  const auto extra = [&](bool flag, std::string_view name, bool by_level) -> Decision<bool> {
    if (level == 0) return {false, "fusion is off"};
    if (flag) return {true, "graph_kernel_flags gives --" + std::string(name)};
    if (by_level) return {true, "fusion opt_level=3 includes it"};
    return {false, "not asked for by graph_kernel_flags" +
                       std::string(level < 3 && name != "enable_recompute_fusion"
                                       ? " and fusion opt_level is below 3"
                                       : "")};
  };
  policy.stitch_fusion =
      extra(policy.fusion_flags.enable_stitch_fusion, "enable_stitch_fusion", level >= 3);
  policy.parallel_fusion =
      extra(policy.fusion_flags.enable_parallel_fusion, "enable_parallel_fusion", level >= 3);
  policy.recompute_fusion =
      extra(policy.fusion_flags.enable_recompute_fusion, "enable_recompute_fusion", false);
}

// Workers that mf launch started on this host (MS_LOCAL_WORKER_NUM): they share its cores.
int local_workers() {
  const char* text = std::getenv("MS_LOCAL_WORKER_NUM");
  if (text == nullptr) return 1;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  return end != text && *end == '\0' && n >= 1 && n <= 4096 ? int(n) : 1;
}

void decide_threads(const Snapshot& snapshot, int cores, int sharing, Policy& policy) {
  const int requested = snapshot.values()["runtime_num_threads"].get<int>();
  const std::string given =
      "runtime_num_threads=" + std::to_string(requested) + origin(snapshot, "runtime_num_threads");
  const std::string machine =
      std::to_string(cores) + " core" + (cores == 1 ? "" : "s") +
      (sharing > 1 ? " (this worker's share: MS_LOCAL_WORKER_NUM=" + std::to_string(sharing) +
                         " workers on this host)"
                   : "");
  if (requested == 0) {
    policy.intra_op_threads = {cores, given + " means every core: " + machine};
  } else if (requested > cores) {
    policy.intra_op_threads = {cores, given + " is capped to the machine's " + machine};
  } else {
    policy.intra_op_threads = {requested, given};
  }
  const int inter = snapshot.values()["inter_op_parallel_num"].get<int>();
  if (inter == 0) {
    // The engine's default, as MindSpore's 0: fill the cores the intra-op pool leaves idle.
    const int fill = std::max(1, cores / std::max(1, policy.intra_op_threads.value));
    policy.inter_op_parallelism = {
        fill,
        "inter_op_parallel_num=0 (default) means the engine's default: as many independent "
        "nodes at once as the intra-op pool leaves cores idle (" +
            machine + " / " + std::to_string(policy.intra_op_threads.value) + " intra-op thread" +
            (policy.intra_op_threads.value == 1 ? "" : "s") + " = " + std::to_string(fill) +
            "), in both executors"};
  } else if (inter > cores) {
    policy.inter_op_parallelism = {cores, "inter_op_parallel_num=" + std::to_string(inter) +
                                              " is capped to the machine's " + machine};
  } else {
    policy.inter_op_parallelism = {inter, "inter_op_parallel_num=" + std::to_string(inter) +
                                              ": independent nodes at once, in both executors"};
  }
}

void decide_memory(const Snapshot& snapshot, Policy& policy) {
  const std::string max_text = snapshot.values()["max_device_memory"].get<std::string>();
  const std::string block_text = snapshot.values()["mempool_block_size"].get<std::string>();
  const std::uint64_t max_bytes = parse_memory_size(max_text);
  const std::uint64_t block_bytes = parse_memory_size(block_text);
  // MindSpore documents both keys for GPU and Ascend and ignores them on CPU; here they bound and
  // grow the CPU pool. Said whenever a value is set, since a GPU script run here may now meet
  // OutOfMemory where MindSpore on CPU would not.
  const auto device_note = [&](const char* key) {
    return snapshot.values()[key] == find_key(context_keys(), key)->default_value
               ? std::string()
               : std::string(
                     " (a GPU/Ascend key in MindSpore, ignored there on CPU; modeflow "
                     "applies it to the CPU pool)");
  };
  policy.max_device_memory_bytes = {max_bytes, "max_device_memory='" + max_text + "'" +
                                                   origin(snapshot, "max_device_memory") +
                                                   ": allocations beyond it fail with OutOfMemory" +
                                                   device_note("max_device_memory")};
  if (block_bytes > max_bytes) {
    policy.mempool_block_bytes = {max_bytes, "mempool_block_size='" + block_text +
                                                 "' is larger than max_device_memory='" + max_text +
                                                 "', so a block is max_device_memory"};
  } else {
    policy.mempool_block_bytes = {block_bytes, "mempool_block_size='" + block_text + "'" +
                                                   origin(snapshot, "mempool_block_size") +
                                                   device_note("mempool_block_size")};
  }
  const bool planned = snapshot.values()["memory_optimize_level"] == "O1";
  policy.memory_optimize_level = {
      planned ? MemoryOptimizeLevel::kO1 : MemoryOptimizeLevel::kO0,
      std::string("memory_optimize_level='") + (planned ? "O1" : "O0") + "'" +
          origin(snapshot, "memory_optimize_level") +
          (planned ? ": offsets planned ahead in one arena, with reuse"
                   : ": each tensor takes a block from the pool (the CPU default)")};
  const Json& env = snapshot.env_config();
  const std::string env_path = snapshot.values()["env_config_path"].get<std::string>();
  if (env.is_null()) {
    policy.memory_reuse = {true, "memory reuse on: no env_config_path file turns it off"};
    policy.rdr = {RdrConfig{}, "Running Data Recorder off: no env_config_path file"};
    return;
  }
  const bool reuse = env["sys"]["mem_Reuse"].get<bool>();
  policy.memory_reuse = {reuse, std::string("sys.mem_Reuse=") + on_off(reuse) +
                                    " in env_config_path file '" + env_path + "'" +
                                    (planned ? ""
                                             : " (matters at memory_optimize_level=O1 only: O0 "
                                               "pools every tensor)")};
  RdrConfig rdr{env["rdr"]["enable"].get<bool>(), env["rdr"]["mode"].get<int>(),
                env["rdr"]["path"].get<std::string>()};
  policy.rdr = {
      rdr, std::string("rdr.enable=") + on_off(rdr.enable) + ", rdr.mode=" +
               std::to_string(rdr.mode) + " in env_config_path file '" + env_path + "'" +
               (rdr.enable ? std::string(": a report for every compiled run (cells, jit "
                                         "functions, .ir and .onnx files) ") +
                                 (rdr.mode == 2 ? "at its end and on a failure" : "that fails") +
                                 ", and for a PYNATIVE_MODE failure (the last ops "
                                 "queued and run)"
                           : "")};
}

template <typename T>
Decision<T> plain(const Snapshot& snapshot, std::string_view key, T value,
                  std::string_view meaning) {
  return {value, quoted(key, snapshot.values()[std::string(key)]) + origin(snapshot, key) +
                     (meaning.empty() ? "" : ": ") + std::string(meaning)};
}

std::string shown_value(const Json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// The key table's reason ("none: ..." without its prefix), or the deprecation note.
std::string why_ignored(const KeySpec& spec) {
  std::string_view why = spec.on_cpu;
  if (why.starts_with("none: ")) why.remove_prefix(6);
  return spec.deprecated.empty() ? std::string(why) : "deprecated; " + std::string(why);
}

std::vector<Explanation> ineffective(const Snapshot& snapshot) {
  std::vector<Explanation> out;
  const auto add = [&out](const std::vector<KeySpec>& table, const Json& values,
                          const std::string& prefix) {
    for (const auto& spec : table) {
      if (!spec.alias_of.empty() || (spec.effective_on_cpu && spec.deprecated.empty())) continue;
      const Json& value = values[spec.name];
      if (value == spec.default_value) continue;
      out.push_back({prefix + spec.name, shown_value(value), why_ignored(spec)});
    }
  };
  add(context_keys(), snapshot.values(), "");
  add(auto_parallel_keys(), snapshot.auto_parallel(), "auto_parallel_context.");
  add(ps_keys(), snapshot.ps(), "ps_context.");
  return out;
}

void decide_parallel(const Json& parallel, Policy& policy) {
  std::string mode = parallel["parallel_mode"].get<std::string>();
  for (char& c : mode) c = char(std::tolower(static_cast<unsigned char>(c)));
  static constexpr ParallelMode kModes[] = {
      ParallelMode::kStandAlone, ParallelMode::kDataParallel, ParallelMode::kHybridParallel,
      ParallelMode::kSemiAutoParallel, ParallelMode::kAutoParallel};
  ParallelMode chosen = ParallelMode::kStandAlone;
  for (ParallelMode m : kModes) {
    if (to_string(m) == mode) chosen = m;
  }
  switch (chosen) {
    case ParallelMode::kDataParallel:
      policy.parallel_mode = {chosen,
                              "parallel_mode=data_parallel: TrainOneStepCell all-reduces the "
                              "gradients over the workers of communication.init()'s group"};
      break;
    case ParallelMode::kHybridParallel:
      policy.parallel_mode = {chosen,
                              "parallel_mode=hybrid_parallel: the network's own collective ops "
                              "(AllReduce, AllGather, Broadcast) run; nothing is inserted"};
      break;
    case ParallelMode::kSemiAutoParallel:
    case ParallelMode::kAutoParallel:
      policy.parallel_mode = {ParallelMode::kStandAlone,
                              "parallel_mode=" + mode +
                                  " is not run here (operator sharding is not implemented): each "
                                  "worker runs the whole network as stand_alone"};
      policy.ineffective_keys.push_back(
          {"auto_parallel_context.parallel_mode", mode,
           "not run: modeflow parallelizes by data only (data_parallel); each worker runs the "
           "whole network as stand_alone"});
      break;
    case ParallelMode::kStandAlone:
      policy.parallel_mode = {chosen, "parallel_mode=stand_alone: gradients stay local"};
      break;
  }
  const bool mean = parallel["gradients_mean"].get<bool>();
  policy.gradients_mean = {
      mean, std::string("gradients_mean=") + (mean ? "true" : "false") +
                (chosen != ParallelMode::kDataParallel ? " (read in data_parallel only)"
                 : mean ? ": the summed gradients are divided by the number of workers"
                        : ": the gradients are summed over the workers (MindSpore's default)")};
  std::vector<int> splits = parallel["all_reduce_fusion_config"].get<std::vector<int>>();
  for (size_t i = 0; i < splits.size(); ++i) {
    MF_CHECK(splits[i] > 0 && (i == 0 || splits[i] > splits[i - 1]), InvalidArgument,
             "For 'context.set_auto_parallel_context', all_reduce_fusion_config must be positive "
             "gradient indices in ascending order; element ",
             i, " is ", splits[i]);
  }
  policy.all_reduce_fusion_config = {
      splits, splits.empty() ? "all_reduce_fusion_config=[]: gradients are all-reduced in buckets "
                               "of about 4 MiB, in backward order"
                             : "all_reduce_fusion_config: a new all-reduce bucket starts at each "
                               "listed gradient index"};
}

// In PYNATIVE_MODE the compile settings reach only what is jit-compiled (a cell with a JitConfig
// or marked for jit, mf::jit functions); the reasons say so, so `explain` reports nothing as
// active that nothing reads.
void note_compiled_scope(bool jit_region, Policy& policy) {
  if (policy.mode.value == ExecutionMode::kGraph) return;
  const std::string note =
      jit_region ? " (for this jit-compiled part of a PYNATIVE_MODE run)"
                 : " (PYNATIVE_MODE: applies to jit-compiled cells and functions only; the rest "
                   "runs op by op)";
  for (std::string* reason :
       {&policy.jit_level.reason, &policy.executor.reason, &policy.fusion_level.reason,
        &policy.dump_level.reason, &policy.compile_cache.reason, &policy.precompile_only.reason,
        &policy.memory_optimize_level.reason}) {
    *reason += note;
  }
}

std::string fusion_flags_reason(const GraphKernelFlags& flags) {
  std::string reason = "parsed from graph_kernel_flags";
  if (flags.unknown.empty()) return reason;
  reason += "; unknown flags ignored:";
  for (const auto& token : flags.unknown) reason += " " + token;
  return reason;
}

}  // namespace

std::string_view to_string(Executor executor) {
  return executor == Executor::kSink ? "SinkExecutor" : "KernelExecutor";
}

std::string_view to_string(ParallelMode mode) {
  switch (mode) {
    case ParallelMode::kStandAlone:
      return "stand_alone";
    case ParallelMode::kDataParallel:
      return "data_parallel";
    case ParallelMode::kHybridParallel:
      return "hybrid_parallel";
    case ParallelMode::kSemiAutoParallel:
      return "semi_auto_parallel";
    case ParallelMode::kAutoParallel:
      return "auto_parallel";
  }
  return "stand_alone";
}

std::string_view to_string(ExecutionMode mode) {
  return mode == ExecutionMode::kGraph ? "GRAPH_MODE" : "PYNATIVE_MODE";
}
std::string_view to_string(MemoryOptimizeLevel level) {
  return level == MemoryOptimizeLevel::kO0 ? "O0" : "O1";
}
std::string_view to_string(DebugLevel level) {
  return level == DebugLevel::kRelease ? "RELEASE" : "DEBUG";
}
JitLevel parse_jit_level(std::string_view text) {
  if (text == "O0") return JitLevel::kO0;
  if (text == "O1") return JitLevel::kO1;
  if (text == "O2") return JitLevel::kO2;
  MF_FAIL(InvalidArgument, "jit_level '", echo(text), "' is not recognized; use O0, O1 or O2");
}

Policy derive_policy(const Snapshot& snapshot, std::optional<JitLevel> network_jit_level) {
  return derive_policy(snapshot, DeriveOptions{.network_jit_level = network_jit_level});
}

Policy derive_policy(const Snapshot& snapshot, const DeriveOptions& options) {
  const Json& v = snapshot.values();
  // Workers started together on one host split its cores, so they do not oversubscribe it.
  const int sharing = options.cores > 0 ? 1 : local_workers();
  const int cores =
      options.cores > 0
          ? options.cores
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / sharing);
  Policy policy;

  const bool graph = v["mode"] == 0;
  policy.mode = {graph ? ExecutionMode::kGraph : ExecutionMode::kPynative,
                 std::string(graph ? "mode=GRAPH_MODE (0)" : "mode=PYNATIVE_MODE (1)") +
                     origin(snapshot, "mode") +
                     (graph ? ": networks are traced and compiled as whole graphs"
                            : ": ops run one by one as they are called")};
  policy.jit_level = decide_jit_level(snapshot, options.network_jit_level);
  if (!graph && policy.jit_level.value == JitLevel::kO2) {
    // MindSpore: a jit region in PYNATIVE mode is never sunk whole.
    constexpr const char* kDowngrade = "Pynative mode can not set jit_level to O2, use O0 instead";
    policy.jit_level = {JitLevel::kO0, policy.jit_level.reason + "; " + kDowngrade};
    log::warn_once("policy:pynative-o2", kDowngrade);
  }
  // The memory the run uses comes from memory_optimize_level, for either executor: the text says
  // what the run does, not what the executor's name suggests.
  const bool arena = v["memory_optimize_level"] == "O1";
  const std::string memory = arena ? "offsets planned ahead in one arena (memory_optimize_level O1)"
                                   : "each tensor's block from the pool, returned after its last "
                                     "reader (memory_optimize_level O0)";
  if (policy.jit_level.value == JitLevel::kO2) {
    policy.executor = {
        Executor::kSink,
        "jit_level O2 sinks the whole graph: SinkExecutor, every kernel bound ahead, "
        "a flat loop with no lookup per op; " +
            memory};
  } else {
    policy.executor = {Executor::kKernelByKernel,
                       "jit_level " + std::string(to_string(policy.jit_level.value)) +
                           " runs kernel by kernel: KernelExecutor, inter_op_parallel_num "
                           "independent nodes at once; " +
                           memory};
  }
  const bool infer_boost = v["jit_config"].value("infer_boost", "off") == "on";
  policy.infer_boost = {
      infer_boost, infer_boost
                       ? "jit_config.infer_boost='on': weights are compiled in as constants (what "
                         "depends on them alone folds; convolution weights are reordered into the "
                         "kernel's layout once, at compile time); replacing a weight recompiles"
                       : "jit_config.infer_boost='off': weights are parameters bound at every run"};
  if (v["disable_format_transform"].get<bool>()) {
    policy.format_transform = {false,
                               "disable_format_transform=true: convolutions and pools keep NCHW "
                               "activations and reorder them to and from channels-last on every "
                               "call"};
  } else {
    // Every level: choosing a kernel's layout is part of choosing the kernel, and op by op does
    // the same (eager_channels_last); a compiled O0 run that reordered around every convolution
    // was 1.4-1.6x slower than op by op.
    policy.format_transform = {true,
                               "float32 convolutions and pools pass channels-last (NHWC) "
                               "activations between them, reordering only at a chain's edges, at "
                               "every jit_level (disable_format_transform=true turns this off)"};
  }
  if (v["disable_format_transform"].get<bool>()) {
    policy.eager_channels_last = {false,
                                  "disable_format_transform=true: op by op, every tensor is "
                                  "stored NCHW and convolutions reorder around each call"};
  } else {
    policy.eager_channels_last = {
        true,
        "op by op, a float32 convolution or pool that runs channels-last "
        "leaves its output so, and the elementwise ops, concats, pools "
        "and convolutions after it keep that order; other ops and reads "
        "get an NCHW copy (disable_format_transform=true turns this off)"};
  }
  decide_fusion(snapshot, policy.jit_level.value, policy);

  // Distribution first: the dump and cache directories depend on the rank.
  const int device_num = snapshot.auto_parallel()["device_num"].get<int>();
  const int rank = snapshot.auto_parallel()["global_rank"].get<int>();
  MF_CHECK(device_num == 1 || rank < device_num, InvalidArgument,
           "For 'context.set_auto_parallel_context', global_rank=", rank,
           " is out of range for device_num=", device_num, "; it must be below device_num");
  policy.device_num = {device_num,
                       "auto_parallel_context.device_num=" + std::to_string(device_num)};
  policy.global_rank = {rank, "auto_parallel_context.global_rank=" + std::to_string(rank)};
  decide_parallel(snapshot.auto_parallel(), policy);

  const int dump = v["save_graphs"].get<int>();
  static constexpr std::string_view kDumpMeaning[] = {
      ": nothing is dumped", ": the IR is written at key stages",
      ": the IR after every pass plus the backend graph and memory plan",
      ": level 2 plus Graphviz .dot files and the fullest front-end detail"};
  policy.dump_level = {dump, "save_graphs=" + std::to_string(dump) +
                                 origin(snapshot, "save_graphs") + std::string(kDumpMeaning[dump])};
  const std::string graphs_path = v["save_graphs_path"].get<std::string>();
  if (device_num > 1) {
    policy.dump_dir = {with_rank(graphs_path, rank),
                       "save_graphs_path='" + graphs_path + "' with rank_" + std::to_string(rank) +
                           "/ below it because device_num=" + std::to_string(device_num) + " > 1"};
  } else {
    policy.dump_dir = {graphs_path, "save_graphs_path='" + graphs_path + "'" +
                                        origin(snapshot, "save_graphs_path") +
                                        " (no rank_<id>/ below it: device_num=1)"};
  }
  policy.compile_cache =
      plain(snapshot, "enable_compile_cache", v["enable_compile_cache"].get<bool>(),
            v["enable_compile_cache"].get<bool>()
                ? "compiled graphs are stored and reused while every compile-relevant value matches"
                : "every network is compiled afresh");
  const std::string cache_path = v["compile_cache_path"].get<std::string>();
  policy.compile_cache_dir = {with_rank(cache_path, rank),
                              "compile_cache_path='" + cache_path + "'" +
                                  origin(snapshot, "compile_cache_path") + " with rank_" +
                                  std::to_string(rank) +
                                  "/ below it (global_rank=" + std::to_string(rank) + ")"};
  policy.precompile_only = plain(
      snapshot, "precompile_only", v["precompile_only"].get<bool>(),
      v["precompile_only"].get<bool>() ? "networks are compiled (and dumped) but not run" : "");

  const bool sync = v["pynative_synchronize"].get<bool>();
  policy.pynative_synchronize = plain(
      snapshot, "pynative_synchronize", sync,
      std::string(sync ? "each op runs before its call returns; errors name the call site"
                       : "ops run in submission order without the caller waiting for their "
                         "results (on a queue thread or on the caller: pynative.queue_thread); "
                         "errors surface at the next sync point") +
          (graph ? " (applies in PYNATIVE_MODE only)" : ""));
  decide_threads(snapshot, cores, sharing, policy);
  // A queue thread overlaps the caller's work with the kernels only on a core the kernels leave
  // idle; beside intra-op threads on every core it takes cores from them at each hand-off (mf run,
  // two threads on two cores, op by op: mobilenet_v2 8.9 ms queued against 3.9 ms on the caller,
  // squeezenet1_0 10.0 vs 6.4, resnet18 13.3 vs 11.9).
  if (sync) {
    policy.pynative_queue_thread = {false, "pynative_synchronize=true: ops run on the caller"};
  } else if (policy.intra_op_threads.value >= cores) {
    policy.pynative_queue_thread = {
        false, "the intra-op threads take every core (" +
                   std::to_string(policy.intra_op_threads.value) + " of " + std::to_string(cores) +
                   "): asynchronous ops run on the calling thread, with no queue thread to take a "
                   "core from the kernels; their errors still surface at the next sync point"};
  } else {
    policy.pynative_queue_thread = {
        true, std::to_string(policy.intra_op_threads.value) + " intra-op thread" +
                  (policy.intra_op_threads.value == 1 ? "" : "s") + " of " + std::to_string(cores) +
                  " cores: asynchronous ops are handed to a queue thread, so the caller goes on "
                  "while they run"};
  }
  const bool deterministic = v["deterministic"] == "ON";
  policy.deterministic =
      plain(snapshot, "deterministic", deterministic,
            deterministic
                ? "matmuls in fixed row blocks and long reductions in a fixed order: the same bits "
                  "for any thread count"
                : "matmuls run as one oneDNN primitive and a long reduction over one axis is split "
                  "across the threads: faster, but the bits may change with the thread count");
  if (deterministic || policy.fusion_level.value < 1) {
    policy.library_epilogues = {
        false, deterministic ? "deterministic=ON: silu, sigmoid, hardswish and hardsigmoid after a "
                               "convolution stay separate ops, with the bits of op by op"
                             : "fusion is off: activations after convolutions stay separate ops"};
  } else {
    policy.library_epilogues = {
        true,
        "silu, sigmoid, hardswish and hardsigmoid after a float32 convolution run inside it as "
        "oneDNN's post-ops, in oneDNN's math (within 2e-6 of the double result; the fusion report "
        "names each); deterministic=ON keeps them separate and bit-identical to op by op"};
  }
  if (policy.infer_boost.value) {
    policy.symbolic_compile = {
        false,
        "jit_config.infer_boost=on compiles the weights in as constants, so a compile is "
        "for its concrete graph: a network with dynamic dimensions compiles each size (the " +
            std::to_string(kDynamicFormsKept) + " most recent kept)"};
  } else {
    policy.symbolic_compile = {
        true,
        "a network with dynamic dimensions compiles once, at its first call's sizes and a "
        "probe, and binds each new size by shape inference alone (the " +
            std::to_string(kDynamicFormsKept) +
            " most recent kept); a graph whose ops depend on the sizes compiles per size, "
            "and its report says why" +
            std::string(policy.compile_cache.value
                            ? "; the compile cache keeps the symbolic compile for every size"
                            : "")};
  }
  decide_memory(snapshot, policy);

  const bool debug = v["debug_level"] == "DEBUG";
  policy.debug_level =
      plain(snapshot, "debug_level", debug ? DebugLevel::kDebug : DebugLevel::kRelease,
            debug ? "the graph is verified after every pass, every dump shows source locations "
                    "and scope chains, and a failing compile or run writes the failing graph as "
                    ".ir beside its error report"
                  : "the graph is verified after passes that changed it; dumps show scopes only");
  policy.reserve_class_name_in_scope =
      plain(snapshot, "reserve_class_name_in_scope", v["reserve_class_name_in_scope"].get<bool>(),
            v["reserve_class_name_in_scope"].get<bool>() ? "scopes read Default/net-Mlp/fc1-Dense"
                                                         : "scopes read Default/net/fc1");
  policy.max_call_depth = plain(snapshot, "max_call_depth", v["max_call_depth"].get<int>(), "");
  const bool check_bprop = v["check_bprop"].get<bool>();
  policy.check_bprop = plain(
      snapshot, "check_bprop", check_bprop,
      check_bprop ? "a cell's custom bprop must return one gradient per input, each of its "
                    "input's shape and dtype"
                  : "a custom bprop's gradients are taken as they come (only None is refused)");
  const bool grad_for_scalar = v["grad_for_scalar"].get<bool>();
  policy.grad_for_scalar =
      plain(snapshot, "grad_for_scalar", grad_for_scalar,
            grad_for_scalar ? "Python int and float arguments of a differentiated function become "
                              "tensor inputs and get gradients"
                            : "Python int and float arguments of a differentiated function are "
                              "constants: their positions are dropped from the gradients");
  const std::string print_path = v["print_file_path"].get<std::string>();
  policy.print_file_path =
      plain(snapshot, "print_file_path", print_path,
            print_path.empty() ? "Print writes to the screen" : "Print writes to this file");
  for (Explanation& key : ineffective(snapshot)) policy.ineffective_keys.push_back(std::move(key));
  policy.origins = origins_of(snapshot);
  note_compiled_scope(options.jit_region, policy);
  return policy;
}

std::vector<Explanation> explain(const Policy& p) {
  const auto b = [](bool value) { return on_off(value); };
  const auto n = [](auto value) { return std::to_string(value); };
  std::vector<Explanation> out = {
      {"mode", std::string(to_string(p.mode.value)), p.mode.reason},
      {"jit_level", std::string(to_string(p.jit_level.value)), p.jit_level.reason},
      {"executor", std::string(to_string(p.executor.value)), p.executor.reason},
      {"infer_boost", b(p.infer_boost.value), p.infer_boost.reason},
      {"format_transform", b(p.format_transform.value), p.format_transform.reason},
      {"eager_channels_last", b(p.eager_channels_last.value), p.eager_channels_last.reason},
      {"fusion.opt_level", n(p.fusion_level.value), p.fusion_level.reason},
      {"fusion.flags", to_string(p.fusion_flags), fusion_flags_reason(p.fusion_flags)},
      {"fusion.stitch", b(p.stitch_fusion.value), p.stitch_fusion.reason},
      {"fusion.parallel", b(p.parallel_fusion.value), p.parallel_fusion.reason},
      {"fusion.recompute", b(p.recompute_fusion.value), p.recompute_fusion.reason},
      {"dump.level", n(p.dump_level.value), p.dump_level.reason},
      {"dump.dir", p.dump_dir.value, p.dump_dir.reason},
      {"compile_cache", b(p.compile_cache.value), p.compile_cache.reason},
      {"compile_cache.dir", p.compile_cache_dir.value, p.compile_cache_dir.reason},
      {"precompile_only", b(p.precompile_only.value), p.precompile_only.reason},
      {"pynative_synchronize", b(p.pynative_synchronize.value), p.pynative_synchronize.reason},
      {"pynative.queue_thread", b(p.pynative_queue_thread.value), p.pynative_queue_thread.reason},
      {"threads.intra_op", n(p.intra_op_threads.value), p.intra_op_threads.reason},
      {"threads.inter_op", n(p.inter_op_parallelism.value), p.inter_op_parallelism.reason},
      {"deterministic", b(p.deterministic.value), p.deterministic.reason},
      {"fusion.library_epilogues", b(p.library_epilogues.value), p.library_epilogues.reason},
      {"dynamic.symbolic_compile", b(p.symbolic_compile.value), p.symbolic_compile.reason},
      {"memory.max_bytes", n(p.max_device_memory_bytes.value), p.max_device_memory_bytes.reason},
      {"memory.pool_block_bytes", n(p.mempool_block_bytes.value), p.mempool_block_bytes.reason},
      {"memory.optimize_level", std::string(to_string(p.memory_optimize_level.value)),
       p.memory_optimize_level.reason},
      {"memory.reuse", b(p.memory_reuse.value), p.memory_reuse.reason},
      {"rdr",
       p.rdr.value.enable ? "on, mode " + n(p.rdr.value.mode) + ", path '" + p.rdr.value.path + "'"
                          : "off",
       p.rdr.reason},
      {"debug_level", std::string(to_string(p.debug_level.value)), p.debug_level.reason},
      {"reserve_class_name_in_scope", b(p.reserve_class_name_in_scope.value),
       p.reserve_class_name_in_scope.reason},
      {"max_call_depth", n(p.max_call_depth.value), p.max_call_depth.reason},
      {"grad.check_bprop", b(p.check_bprop.value), p.check_bprop.reason},
      {"grad.grad_for_scalar", b(p.grad_for_scalar.value), p.grad_for_scalar.reason},
      {"print_file_path", p.print_file_path.value.empty() ? "(screen)" : p.print_file_path.value,
       p.print_file_path.reason},
      {"parallel.device_num", n(p.device_num.value), p.device_num.reason},
      {"parallel.global_rank", n(p.global_rank.value), p.global_rank.reason},
      {"parallel.mode", std::string(to_string(p.parallel_mode.value)), p.parallel_mode.reason},
      {"parallel.gradients_mean", b(p.gradients_mean.value), p.gradients_mean.reason},
      {"parallel.all_reduce_fusion_config",
       n(int(p.all_reduce_fusion_config.value.size())) + " split points",
       p.all_reduce_fusion_config.reason},
  };
  for (const auto& key : p.origins) out.push_back({"set_by." + key.name, key.value, key.reason});
  for (const auto& key : p.ineffective_keys) {
    out.push_back({"ignored." + key.name, key.value, key.reason});
  }
  return out;
}

}  // namespace mf::context
