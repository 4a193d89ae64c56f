#include "context/key_table.h"

#include <algorithm>
#include <sstream>

#include "context/value_parsing.h"

// The tables name only the fields that differ from KeySpec's defaults; GCC's -Wextra would flag
// every omitted designated initializer even though each has a default member initializer.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace mf::context {
namespace {

using VT = ValueType;

// The largest max_call_depth: each call level costs the PYNATIVE interpreter (engine/ir_runner.cc)
// and the executors (runtime/kernel_executor.cc) a few stack frames. Measured with a chain of
// nested calls on the default 8 MiB main-thread stack (tests/engine/hostile_input_test.cc,
// MF_TEST_CALL_DEPTH): see the key's doc for the margin kept.
constexpr std::int64_t kMaxCallDepthBound = 4000;

// Defaults, ranges and devices follow ../shared/seeds/set_context.zh.rst (the newest document);
// where this engine gives a key a real effect on CPU although the document lists it for GPU/Ascend
// only, `effective_on_cpu` says so and the doc line ends with "(CPU: ...)".
std::vector<KeySpec> make_context_keys() {
  return {
      // System configuration.
      {.name = "device_id",
       .type = VT::kInt,
       .default_value = 0,
       .example = 1,
       .min = 0,
       .max = 4095,
       .doc = "ID of the target device, in [0, 4095]"},
      {.name = "device_target",
       .type = VT::kChoice,
       .default_value = "CPU",
       .example = "cpu",
       .choices = {"CPU", "GPU", "Ascend"},
       .ignore_case = true,
       .compile_relevant = true,
       .doc = "Target device; this build runs on CPU only (GPU and Ascend are rejected)",
       .check = check_device_target},
      {.name = "max_device_memory",
       .type = VT::kMemorySize,
       .default_value = "1024GB",
       .example = "3.5GB",
       .devices = kGpu | kAscend,
       .doc = "Maximum memory the engine may hold, \"xxGB\" (CPU: the allocator's limit)"},
      {.name = "variable_memory_max_size",
       .type = VT::kMemorySize,
       .default_value = "1024GB",
       .example = "6GB",
       .devices = kAscend,
       .doc = "Deprecated; sets max_device_memory",
       .deprecated = "'variable_memory_max_size' is deprecated and will be removed; it now sets "
                     "'max_device_memory', use that instead",
       .alias_of = "max_device_memory"},
      {.name = "mempool_block_size",
       .type = VT::kMemorySize,
       .default_value = "1GB",
       .example = "2GB",
       .min_gb = 1,
       .devices = kGpu | kAscend,
       .doc = "Block size of the memory pool, \"xxGB\", at least 1GB (CPU: the pool's block size)"},
      {.name = "op_timeout",
       .type = VT::kInt,
       .default_value = 900,
       .example = 60,
       .min = 0,
       .devices = kGpu | kAscend,
       .effective_on_cpu = false,
       .doc = "Maximum execution time of one operator in seconds; 0 means the device default"},
      // Debug configuration.
      {.name = "save_graphs",
       .type = VT::kSaveGraphs,
       .default_value = 0,
       .example = 2,
       .doc =
           "Save intermediate graphs: 0/false none, 1 key stages, 2/true every pass, 3 + Graphviz"},
      {.name = "save_graphs_path",
       .type = VT::kString,
       .default_value = ".",
       .example = "./ir",
       .doc = "Directory for saved graphs (rank_<id>/ below it when device_num > 1); created if "
              "missing"},
      {.name = "enable_dump",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Deprecated; no effect",
       .deprecated =
           "'enable_dump' is deprecated and will be removed in the next version; it has no "
           "effect"},
      {.name = "save_dump_path",
       .type = VT::kString,
       .default_value = ".",
       .example = "./dump",
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Deprecated; no effect",
       .deprecated =
           "'save_dump_path' is deprecated and will be removed in the next version; it has "
           "no effect"},
      {.name = "deterministic",
       .type = VT::kChoice,
       .default_value = "OFF",
       .example = "ON",
       .choices = {"ON", "OFF"},
       .devices = kAscend,
       .compile_relevant = true,
       .doc = "Deterministic operators, ON or OFF (CPU: fixed reduction order and thread split)"},
      {.name = "print_file_path",
       .type = VT::kString,
       .default_value = "",
       .example = "print.pb",
       .devices = kAscend,
       .doc = "File that receives Print output; empty prints to the screen (CPU: honoured)"},
      {.name = "env_config_path",
       .type = VT::kString,
       .default_value = "",
       .example = "",
       .doc = "JSON file with {\"rdr\": {enable, mode, path}, \"sys\": {\"mem_Reuse\": bool}}"},
      {.name = "precompile_only",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "Compile (and dump) networks but do not execute them"},
      {.name = "reserve_class_name_in_scope",
       .type = VT::kBool,
       .default_value = true,
       .example = false,
       .compile_relevant = true,
       .doc = "Keep class names in scope names: Default/net-Net1 rather than Default/net"},
      {.name = "pynative_synchronize",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "PYNATIVE: run each op before the call returns, so errors name the call site"},
      {.name = "debug_level",
       .type = VT::kChoice,
       .default_value = "RELEASE",
       .example = "DEBUG",
       .choices = {"RELEASE", "DEBUG"},
       .compile_relevant = true,
       .doc = "RELEASE drops some debug information for faster compiles; DEBUG keeps it"},
      // Execution control.
      {.name = "mode",
       .type = VT::kMode,
       .default_value = 1,
       .example = "GRAPH_MODE",
       .compile_relevant = true,
       .doc = "GRAPH_MODE (0) compiles whole graphs; PYNATIVE_MODE (1) runs op by op"},
      {.name = "enable_graph_kernel",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .devices = kAscend | kGpu,
       .compile_relevant = true,
       .doc = "Turn on graph-kernel fusion at opt_level 2 (CPU: fuses elementwise/reduce chains)"},
      {.name = "graph_kernel_flags",
       .type = VT::kString,
       .default_value = "",
       .example = "--opt_level=3 --dump_as_text",
       .devices = kAscend | kGpu,
       .compile_relevant = true,
       .doc = "Fusion options such as \"--opt_level=2 --dump_as_text\"; beat enable_graph_kernel "
              "(CPU: honoured)",
       .check = check_graph_kernel_flags},
      {.name = "enable_reduce_precision",
       .type = VT::kBool,
       .default_value = true,
       .example = false,
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Lower precision automatically when an operator lacks the requested one"},
      {.name = "aoe_tune_mode",
       .type = VT::kChoice,
       .default_value = "",
       .example = "online",
       .choices = {"online", "offline"},
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "AOE tuning: online, or offline (saves GE graphs); not set by default"},
      {.name = "aoe_config",
       .type = VT::kDict,
       .default_value = Json::object(),
       .example = Json{{"job_type", "1"}},
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Parameters of the AOE tool",
       .sub_keys = {{.name = "job_type",
                     .type = VT::kChoice,
                     .default_value = "2",
                     .example = "1",
                     .choices = {"1", "2"},
                     .doc = "\"1\" subgraph tuning, \"2\" operator tuning"}}},
      {.name = "check_bprop",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .compile_relevant = true,
       .doc = "Check that back-propagation outputs match their inputs' shape and dtype"},
      {.name = "max_call_depth",
       .type = VT::kInt,
       .default_value = 1000,
       .example = 80,
       .min = 1,
       .max = kMaxCallDepthBound,
       .doc = "Maximum depth of nested calls while tracing, compiling and running; 1 to 4000 (the "
              "interpreter recurses once per call level: 4000 levels fit the default 8 MiB stack "
              "with margin)"},
      {.name = "grad_for_scalar",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .compile_relevant = true,
       .doc = "Allow gradients with respect to scalar inputs"},
      {.name = "enable_compile_cache",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "Store compiled graphs and load them again when nothing compile-relevant changed"},
      {.name = "compile_cache_path",
       .type = VT::kString,
       .default_value = ".",
       .example = "./cache",
       .doc = "Directory of the compile cache (entries go to rank_<id>/ below it)"},
      {.name = "inter_op_parallel_num",
       .type = VT::kInt,
       .default_value = 0,
       .example = 2,
       .min = 0,
       .doc = "How many independent nodes may run at once; 0 lets the engine choose"},
      {.name = "runtime_num_threads",
       .type = VT::kInt,
       .default_value = 30,
       .example = 4,
       .min = 0,
       .doc = "Threads of the intra-op pool, capped to the machine's cores; 0 means all cores"},
      {.name = "disable_format_transform",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "Disable the automatic NCHW to NHWC format transform (the format-transform pass: "
              "channels-last activations between convolutions and pools at jit_level O1 and up)"},
      {.name = "support_binary",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .effective_on_cpu = false,
       .doc = "Run compiled Python (.pyc/.so) in GRAPH_MODE; no meaning for a C++ engine"},
      {.name = "memory_optimize_level",
       .type = VT::kChoice,
       .default_value = "O0",
       .example = "O1",
       .choices = {"O0", "O1"},
       .compile_relevant = true,
       .doc = "O0 pools memory per tensor; O1 plans offsets with reuse (SOMAS-like)"},
      {.name = "memory_offload",
       .type = VT::kChoice,
       .default_value = "OFF",
       .example = "ON",
       .choices = {"ON", "OFF"},
       .devices = kGpu | kAscend,
       .effective_on_cpu = false,
       .doc = "Copy idle data to host memory when device memory runs short"},
      {.name = "ascend_config",
       .type = VT::kDict,
       .default_value = Json{{"atomic_clean_policy", 1},
                             {"matmul_allow_hf32", false},
                             {"conv_allow_hf32", true},
                             {"exception_dump", "2"},
                             {"host_scheduling_max_threshold", 0}},
       .example = Json{{"precision_mode", "force_fp32"}},
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Ascend-only parameters (precision_mode, jit_compile, ge_options, ...)",
       .sub_keys = {{.name = "precision_mode",
                     .type = VT::kChoice,
                     .example = "force_fp32",
                     .choices = {"force_fp16", "allow_fp32_to_fp16", "allow_mix_precision",
                                 "must_keep_origin_dtype", "force_fp32", "allow_fp32_to_bf16",
                                 "allow_mix_precision_fp16", "allow_mix_precision_bf16"},
                     .doc = "Mixed-precision mode"},
                    {.name = "jit_compile",
                     .type = VT::kBool,
                     .example = true,
                     .doc = "Prefer online operator compilation"},
                    {.name = "atomic_clean_policy",
                     .type = VT::kInt,
                     .default_value = 1,
                     .example = 0,
                     .min = 0,
                     .max = 1,
                     .doc = "0 clean atomic memory at once, 1 per operator"},
                    {.name = "matmul_allow_hf32",
                     .type = VT::kBool,
                     .default_value = false,
                     .example = true,
                     .doc = "Allow FP32 to HF32 in MatMul"},
                    {.name = "conv_allow_hf32",
                     .type = VT::kBool,
                     .default_value = true,
                     .example = false,
                     .doc = "Allow FP32 to HF32 in Conv"},
                    {.name = "exception_dump",
                     .type = VT::kChoice,
                     .default_value = "2",
                     .example = "0",
                     .choices = {"0", "1", "2"},
                     .doc = "Dump of failing AICore operators: 0 off, 1 in+out, 2 in"},
                    {.name = "op_precision_mode",
                     .type = VT::kString,
                     .example = "./op_precision.ini",
                     .doc = "Path of the operator precision-mode file"},
                    {.name = "op_debug_option",
                     .type = VT::kChoice,
                     .example = "oom",
                     .choices = {"oom"},
                     .doc = "Operator debugging: oom checks out-of-bounds memory access"},
                    {.name = "ge_options",
                     .type = VT::kOpaqueDict,
                     .example = Json{{"global", Json::object()}},
                     .doc = "CANN options: {\"global\": {...}, \"session\": {...}}",
                     .check = check_ge_options},
                    {.name = "parallel_speed_up_json_path",
                     .type = VT::kString,
                     .example = "./parallel_speed_up.json",
                     .doc = "Parallel speed-up configuration file"},
                    {.name = "host_scheduling_max_threshold",
                     .type = VT::kInt,
                     .default_value = 0,
                     .example = 100,
                     .min = 0,
                     .doc = "Static root graphs with fewer nodes use dynamic-shape scheduling"}}},
      {.name = "jit_syntax_level",
       .type = VT::kChoice,
       .default_value = "LAX",
       .example = "STRICT",
       .choices = {"STRICT", "COMPATIBLE", "LAX"},
       .compile_relevant = true,
       .doc = "Syntax accepted by graph compilation: STRICT, COMPATIBLE or LAX"},
      {.name = "gpu_config",
       .type = VT::kDict,
       .default_value = Json{{"conv_fprop_algo", "normal"},
                             {"conv_dgrad_algo", "normal"},
                             {"conv_wgrad_algo", "normal"},
                             {"conv_allow_tf32", true},
                             {"matmul_allow_tf32", false}},
       .example = Json{{"conv_fprop_algo", "performance"}},
       .devices = kGpu,
       .effective_on_cpu = false,
       .doc = "GPU-only parameters (cuDNN algorithms, TF32)",
       .sub_keys = {{.name = "conv_fprop_algo",
                     .type = VT::kChoice,
                     .default_value = "normal",
                     .example = "performance",
                     .choices = {"normal", "performance", "implicit_gemm", "implicit_precomp_gemm",
                                 "gemm", "direct", "fft", "fft_tiling", "winograd",
                                 "winograd_nonfused"},
                     .doc = "cuDNN forward convolution algorithm"},
                    {.name = "conv_dgrad_algo",
                     .type = VT::kChoice,
                     .default_value = "normal",
                     .example = "algo_1",
                     .choices = {"normal", "performance", "algo_0", "algo_1", "fft", "fft_tiling",
                                 "winograd", "winograd_nonfused"},
                     .doc = "cuDNN backward-data convolution algorithm"},
                    {.name = "conv_wgrad_algo",
                     .type = VT::kChoice,
                     .default_value = "normal",
                     .example = "algo_3",
                     .choices = {"normal", "performance", "algo_0", "algo_1", "algo_3", "fft",
                                 "fft_tiling", "winograd_nonfused"},
                     .doc = "cuDNN backward-filter convolution algorithm"},
                    {.name = "conv_allow_tf32",
                     .type = VT::kBool,
                     .default_value = true,
                     .example = false,
                     .doc = "TF32 tensor cores in cuDNN convolutions"},
                    {.name = "matmul_allow_tf32",
                     .type = VT::kBool,
                     .default_value = false,
                     .example = true,
                     .doc = "TF32 tensor cores in cuBLAS matmuls"}}},
      {.name = "jit_config",
       .type = VT::kDict,
       .default_value = Json{{"jit_level", ""}, {"infer_boost", "off"}},
       .example = Json{{"jit_level", "O1"}},
       .compile_relevant = true,
       .doc = "Global compile options; a network's own JitConfig wins over them",
       .sub_keys = {{.name = "jit_level",
                     .type = VT::kChoice,
                     .default_value = "",
                     .example = "O1",
                     .choices = {"O0", "O1", "O2"},
                     .doc = "O0 essential passes, O1 + common optimizations and fusion, O2 + sink "
                            "execution; empty means O0 on CPU"},
                    {.name = "infer_boost",
                     .type = VT::kChoice,
                     .default_value = "off",
                     .example = "on",
                     .choices = {"on", "off"},
                     .doc = "Inference mode"}}},
      // Older keys (MindSpore 1.x), kept so old scripts and files still load.
      {.name = "enable_profiling",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Deprecated; use a profiler instead",
       .deprecated = "'enable_profiling' is deprecated and will be removed; it has no effect"},
      {.name = "profiling_options",
       .type = VT::kString,
       .default_value = "",
       .example = "{\"output\": \"/tmp/prof\"}",
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Deprecated; use a profiler instead",
       .deprecated = "'profiling_options' is deprecated and will be removed; it has no effect"},
      {.name = "enable_sparse",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .effective_on_cpu = false,
       .doc = "Deprecated; sparse tensors need no switch",
       .deprecated = "'enable_sparse' is deprecated and will be removed; it has no effect"},
      {.name = "auto_tune_mode",
       .type = VT::kChoice,
       .default_value = "NO_TUNE",
       .example = "GA",
       .choices = {"NO_TUNE", "RL", "GA", "RL,GA", "GA,RL"},
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Deprecated; use aoe_tune_mode",
       .deprecated = "'auto_tune_mode' is deprecated and will be removed; use 'aoe_tune_mode'"},
  };
}

std::vector<KeySpec> make_auto_parallel_keys() {
  return {
      {.name = "device_num",
       .type = VT::kInt,
       .default_value = 1,
       .example = 8,
       .min = 1,
       .max = 4096,
       .compile_relevant = true,
       .doc = "Number of devices, in [1, 4096]"},
      {.name = "global_rank",
       .type = VT::kInt,
       .default_value = 0,
       .example = 3,
       .min = 0,
       .max = 4095,
       .compile_relevant = true,
       .doc = "Global rank of this process, in [0, 4095]"},
      {.name = "gradients_mean",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .compile_relevant = true,
       .doc = "Divide gradients by device_num after all-reduce"},
      {.name = "gradient_fp32_sync",
       .type = VT::kBool,
       .default_value = true,
       .example = false,
       .compile_relevant = true,
       .doc = "All-reduce gradients in fp32"},
      {.name = "loss_repeated_mean",
       .type = VT::kBool,
       .default_value = true,
       .example = false,
       .compile_relevant = true,
       .doc = "Take the mean of a repeatedly computed loss"},
      {.name = "parallel_mode",
       .type = VT::kChoice,
       .default_value = "stand_alone",
       .example = "data_parallel",
       .choices = {"stand_alone", "data_parallel", "hybrid_parallel", "semi_auto_parallel",
                   "auto_parallel"},
       .ignore_case = true,
       .compile_relevant = true,
       .doc = "stand_alone, data_parallel, hybrid_parallel, semi_auto_parallel or auto_parallel"},
      {.name = "search_mode",
       .type = VT::kChoice,
       .default_value = "dynamic_programming",
       .example = "sharding_propagation",
       .choices = {"recursive_programming", "dynamic_programming", "sharding_propagation"},
       .compile_relevant = true,
       .doc = "Strategy search of auto_parallel"},
      {.name = "auto_parallel_search_mode",
       .type = VT::kChoice,
       .default_value = "dynamic_programming",
       .example = "recursive_programming",
       .choices = {"recursive_programming", "dynamic_programming", "sharding_propagation"},
       .doc = "Deprecated; sets search_mode",
       .deprecated =
           "'auto_parallel_search_mode' is deprecated; it now sets 'search_mode', use that "
           "instead",
       .alias_of = "search_mode"},
      {.name = "parameter_broadcast",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "Broadcast device 0's parameters before training"},
      {.name = "strategy_ckpt_load_file",
       .type = VT::kString,
       .default_value = "",
       .example = "./strategy.ckpt",
       .compile_relevant = true,
       .doc = "Parallel strategy checkpoint to load"},
      {.name = "strategy_ckpt_save_file",
       .type = VT::kString,
       .default_value = "",
       .example = "./strategy.ckpt",
       .doc = "Parallel strategy checkpoint to save"},
      {.name = "full_batch",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .compile_relevant = true,
       .doc = "Each device loads the whole batch (prefer dataset_strategy)"},
      {.name = "dataset_strategy",
       .type = VT::kStrategy,
       .default_value = "data_parallel",
       .example = Json::array({Json::array({1, 8}), Json::array({1, 8})}),
       .choices = {"data_parallel", "full_batch"},
       .compile_relevant = true,
       .doc = "\"data_parallel\", \"full_batch\" or a tuple of per-input shard tuples"},
      {.name = "enable_parallel_optimizer",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .compile_relevant = true,
       .doc = "Shard the optimizer's weight update"},
      {.name = "all_reduce_fusion_config",
       .type = VT::kIntList,
       .default_value = Json::array(),
       .example = Json::array({8, 160}),
       .compile_relevant = true,
       .doc = "Gradient indices that split all-reduce fusion groups, ascending; empty = off"},
      {.name = "pipeline_stages",
       .type = VT::kInt,
       .default_value = 1,
       .example = 2,
       .min = 1,
       .compile_relevant = true,
       .doc = "Number of pipeline stages (semi_auto_parallel)"},
      {.name = "grad_accumulation_step",
       .type = VT::kInt,
       .default_value = 1,
       .example = 4,
       .min = 1,
       .compile_relevant = true,
       .doc = "Gradient accumulation steps, a positive integer"},
      {.name = "parallel_optimizer_config",
       .type = VT::kDict,
       .default_value =
           Json{{"gradient_accumulation_shard", true}, {"parallel_optimizer_threshold", 64}},
       .example = Json{{"gradient_accumulation_shard", false}},
       .compile_relevant = true,
       .doc = "Details of the parallel optimizer",
       .sub_keys = {{.name = "gradient_accumulation_shard",
                     .type = VT::kBool,
                     .default_value = true,
                     .example = false,
                     .doc = "Shard accumulated gradients across data-parallel devices"},
                    {.name = "parallel_optimizer_threshold",
                     .type = VT::kInt,
                     .default_value = 64,
                     .example = 32,
                     .min = 0,
                     .doc = "Parameters smaller than this many KB are not sharded"}}},
      {.name = "comm_fusion",
       .type = VT::kOpaqueDict,
       .default_value = Json::object(),
       .example = Json{{"allreduce", Json{{"mode", "size"}, {"config", 32}}}},
       .compile_relevant = true,
       .doc = "{\"allreduce\"|\"allgather\"|\"reducescatter\": {\"mode\": auto|size|index, "
              "\"config\": ...}}",
       .check = check_comm_fusion},
  };
}

std::vector<KeySpec> make_ps_keys() {
  return {
      {.name = "enable_ps",
       .type = VT::kBool,
       .default_value = false,
       .example = false,
       .effective_on_cpu = false,
       .doc = "Parameter-server training; not available in this build (true is rejected)",
       .check = check_enable_ps},
      {.name = "config_file_path",
       .type = VT::kString,
       .default_value = "",
       .example = "./recovery.json",
       .effective_on_cpu = false,
       .doc = "Configuration file for server disaster recovery"},
      {.name = "scheduler_manage_port",
       .type = VT::kInt,
       .default_value = 11202,
       .example = 11203,
       .min = 1,
       .max = 65535,
       .effective_on_cpu = false,
       .doc = "Scheduler port for scaling"},
      {.name = "enable_ssl",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .effective_on_cpu = false,
       .doc = "SSL between workers and servers"},
      {.name = "client_password",
       .type = VT::kString,
       .default_value = "",
       .example = "123456",
       .effective_on_cpu = false,
       .doc = "Password of the client certificate's key"},
      {.name = "server_password",
       .type = VT::kString,
       .default_value = "",
       .example = "123456",
       .effective_on_cpu = false,
       .doc = "Password of the server certificate's key"},
  };
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += separator;
    out += item;
  }
  return out;
}

}  // namespace

const std::vector<KeySpec>& context_keys() {
  static const std::vector<KeySpec> keys = make_context_keys();
  return keys;
}

const std::vector<KeySpec>& auto_parallel_keys() {
  static const std::vector<KeySpec> keys = make_auto_parallel_keys();
  return keys;
}

const std::vector<KeySpec>& ps_keys() {
  static const std::vector<KeySpec> keys = make_ps_keys();
  return keys;
}

const KeySpec* find_key(const std::vector<KeySpec>& table, std::string_view name) {
  for (const auto& spec : table) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

std::vector<std::string> closest_keys(const std::vector<KeySpec>& table, std::string_view name) {
  // A suggestion must be near enough to be a plausible typo: about a third of the word may differ.
  const std::size_t limit = std::max<std::size_t>(2, name.size() / 3);
  std::vector<std::pair<std::size_t, std::string>> near;
  for (const auto& spec : table) {
    const std::size_t distance = edit_distance(name, spec.name);
    if (distance <= limit) near.emplace_back(distance, spec.name);
    // A sub-key given at the top level ("jit_level" for "jit_config.jit_level") is named whole.
    for (const auto& sub : spec.sub_keys) {
      const std::size_t sub_distance = edit_distance(name, sub.name);
      if (sub_distance <= limit) near.emplace_back(sub_distance, spec.name + "." + sub.name);
    }
  }
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (std::size_t i = 0; i < near.size() && i < 3; ++i) out.push_back(near[i].second);
  return out;
}

std::string type_name(const KeySpec& spec) {
  switch (spec.type) {
    case ValueType::kBool:
      return "bool";
    case ValueType::kInt:
      return "int";
    case ValueType::kString:
      return "str";
    case ValueType::kChoice:
      return "str";
    case ValueType::kMode:
      return "int|str";
    case ValueType::kSaveGraphs:
      return "bool|int";
    case ValueType::kMemorySize:
      return "str (size)";
    case ValueType::kIntList:
      return "list[int]";
    case ValueType::kStrategy:
      return "str|tuple";
    case ValueType::kDict:
      return "dict";
    case ValueType::kOpaqueDict:
      return "dict";
  }
  return "?";
}

std::string device_names(unsigned devices) {
  std::vector<std::string> names;
  if (devices & kCpu) names.push_back("CPU");
  if (devices & kGpu) names.push_back("GPU");
  if (devices & kAscend) names.push_back("Ascend");
  return join(names, "/");
}

std::string allowed_values(const KeySpec& spec) {
  std::ostringstream out;
  switch (spec.type) {
    case ValueType::kBool:
      return "true, false";
    case ValueType::kInt:
      if (spec.min && spec.max) {
        out << "[" << *spec.min << ", " << *spec.max << "]";
      } else if (spec.min) {
        out << "an integer >= " << *spec.min;
      } else {
        out << "an integer";
      }
      return out.str();
    case ValueType::kString:
      return "a string";
    case ValueType::kChoice:
      return join(spec.choices, ", ");
    case ValueType::kMode:
      return "GRAPH_MODE (0), PYNATIVE_MODE (1)";
    case ValueType::kSaveGraphs:
      return "0, 1, 2, 3, false (=0), true (=2)";
    case ValueType::kMemorySize:
      if (spec.min_gb > 0) {
        out << "\"xxGB\", at least " << spec.min_gb << "GB";
        return out.str();
      }
      return "\"xxGB\", above 0GB";
    case ValueType::kIntList:
      return "a list of non-negative integers, ascending";
    case ValueType::kStrategy:
      return join(spec.choices, ", ") + ", or a list of lists of ints";
    case ValueType::kDict: {
      std::vector<std::string> names;
      for (const auto& sub : spec.sub_keys) names.push_back(sub.name);
      return "sub-keys " + join(names, ", ");
    }
    case ValueType::kOpaqueDict:
      return "an object (see doc)";
  }
  return "";
}

Json defaults_of(const std::vector<KeySpec>& table) {
  Json out = Json::object();
  for (const auto& spec : table) {
    if (!spec.alias_of.empty()) continue;  // an alias has no storage of its own
    out[spec.name] = spec.default_value;
  }
  return out;
}

}  // namespace mf::context
