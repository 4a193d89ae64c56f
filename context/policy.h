#pragma once
// Policy: every engine decision derived from a context Snapshot, typed and with its reason. Layers
// below the engine never see key names; they get options the engine builds from these fields.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/jit_level.h"
#include "context/context.h"
#include "context/graph_kernel_flags.h"

namespace mf::context {

enum class ExecutionMode { kGraph, kPynative };
using mf::JitLevel;
using mf::to_string;
enum class MemoryOptimizeLevel { kO0, kO1 };
enum class DebugLevel { kRelease, kDebug };
// What runs a compiled graph: kernel by kernel (jit O0/O1) or the whole graph sunk (O2).
enum class Executor { kKernelByKernel, kSink };
// How a training step spreads over the workers of a job (set_auto_parallel_context's
// parallel_mode). Semi-auto and auto parallel are validated and run as stand-alone.
enum class ParallelMode {
  kStandAlone,
  kDataParallel,
  kHybridParallel,
  kSemiAutoParallel,
  kAutoParallel
};

std::string_view to_string(ExecutionMode mode);  // "GRAPH_MODE" / "PYNATIVE_MODE"
std::string_view to_string(MemoryOptimizeLevel level);
std::string_view to_string(DebugLevel level);
std::string_view to_string(Executor executor);  // "KernelExecutor" / "SinkExecutor"
std::string_view to_string(ParallelMode mode);  // "data_parallel", ...
// "O0" / "O1" / "O2" -> JitLevel; throws InvalidArgument otherwise (for a network's own JitConfig).
JitLevel parse_jit_level(std::string_view text);

// One decision: the value in effect and why, in words a user can act on.
template <typename T>
struct Decision {
  T value{};
  std::string reason;
};

// The Running Data Recorder settings of the env_config_path file.
struct RdrConfig {
  bool enable = false;
  int mode = 1;      // 1: export on failure; 2: on failure and at a normal end
  std::string path;  // absolute, or empty
};

// One line of `mf context explain`: the decision's name, its value as text, and the reason.
struct Explanation {
  std::string name;
  std::string value;
  std::string reason;
};

// Everything the engine decides from the context. Built by derive_policy; a plain value to copy and
// hold.
// Concrete signatures a network with dynamic dimensions keeps prepared (compiled forms, memory
// plans, kernels), the most recent first.
inline constexpr int kDynamicFormsKept = 8;

struct Policy {
  Decision<ExecutionMode> mode;
  Decision<JitLevel> jit_level;
  Decision<Executor> executor;  // follows jit_level
  Decision<bool> infer_boost;
  // The format-transform pass: float32 convolutions and pools keep channels-last activations
  // between them (jit_level O1 and up, unless disable_format_transform).
  Decision<bool> format_transform;
  // PYNATIVE: an eager convolution leaves its output in channels-last order for the next one
  // (engine/eager/eager_layout.h), unless disable_format_transform.
  Decision<bool> eager_channels_last;
  // Graph-kernel fusion: 0 none, 1 basic, 2 + CSE and simplification, 3 + stitch and parallel
  // fusion.
  Decision<int> fusion_level;
  GraphKernelFlags
      fusion_flags;  // parsed graph_kernel_flags (lists of ops and passes, dump_as_text)
  Decision<bool> stitch_fusion;
  Decision<bool> parallel_fusion;
  Decision<bool> recompute_fusion;
  // Dumps: save_graphs level and the directory (rank_<id>/ below save_graphs_path when device_num >
  // 1).
  Decision<int> dump_level;
  Decision<std::string> dump_dir;
  Decision<bool> compile_cache;
  Decision<std::string> compile_cache_dir;  // compile_cache_path/rank_<global_rank>
  Decision<bool> precompile_only;
  // Execution.
  Decision<bool> pynative_synchronize;
  // Asynchronous PYNATIVE ops handed to a queue thread (true), or run on the calling thread with
  // their errors still reported at the next sync point (false: no core left for that thread).
  Decision<bool> pynative_queue_thread;
  Decision<int> intra_op_threads;      // min(runtime_num_threads, cores); 0 -> cores
  Decision<int> inter_op_parallelism;  // nodes that may run at once
  Decision<bool> deterministic;
  // Activations after convolutions that only oneDNN's post-op math fuses (silu, sigmoid,
  // hardswish, hardsigmoid): fused when not deterministic and fusion is on.
  Decision<bool> library_epilogues;
  // A network with dynamic input dimensions (Cell.set_inputs with None, ONNX dim_param): one
  // symbolic compile bound to each size (true), or a compile per size.
  Decision<bool> symbolic_compile;
  // Memory.
  Decision<std::uint64_t> max_device_memory_bytes;
  Decision<std::uint64_t> mempool_block_bytes;
  Decision<MemoryOptimizeLevel> memory_optimize_level;
  Decision<bool> memory_reuse;  // env_config_path's sys.mem_Reuse (true unless the file says false)
  Decision<RdrConfig> rdr;
  // Front end and debugging.
  Decision<DebugLevel> debug_level;
  Decision<bool> reserve_class_name_in_scope;
  Decision<int> max_call_depth;
  // Gradients: a custom bprop's results checked against its inputs (count, shape, dtype), and
  // Python numbers given to a differentiated function taken as differentiable inputs.
  Decision<bool> check_bprop;
  Decision<bool> grad_for_scalar;
  Decision<std::string> print_file_path;  // empty: print to the screen
  // Distribution (from the auto-parallel context).
  Decision<int> device_num;
  Decision<int> global_rank;
  Decision<ParallelMode> parallel_mode;
  Decision<bool> gradients_mean;  // data parallel: divide the summed gradients by the workers
  // Data parallel: gradient indices where a new all-reduce bucket starts (empty: fixed-size
  // buckets).
  Decision<std::vector<int>> all_reduce_fusion_config;
  // Keys set away from their defaults that do nothing here (GPU/Ascend-only, deprecated, no
  // autodiff, distributed and ps keys), each with the reason from the key table.
  std::vector<Explanation> ineffective_keys;
  // Keys set through something other than set_context (a MindSpore 2.5+ function such as
  // runtime.set_memory, or an environment variable such as MS_DEV_SAVE_GRAPHS), naming it.
  std::vector<Explanation> origins;
};

// Inputs of derive_policy besides the snapshot.
struct DeriveOptions {
  std::optional<JitLevel>
      network_jit_level;  // a network's own JitConfig; beats jit_config.jit_level
  int cores = 0;          // 0: std::thread::hardware_concurrency()
  // The policy of a jit-compiled cell or function called in PYNATIVE_MODE: the compile settings
  // apply to it, and the reasons say so (otherwise, in PYNATIVE_MODE, they say the settings apply
  // to jit-compiled parts only).
  bool jit_region = false;
};

Policy derive_policy(const Snapshot& snapshot, std::optional<JitLevel> network_jit_level = {});
Policy derive_policy(const Snapshot& snapshot, const DeriveOptions& options);

std::vector<Explanation> explain(const Policy& policy);

}  // namespace mf::context
