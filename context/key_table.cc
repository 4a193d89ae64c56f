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
       .effective_on_cpu = false,
       .doc = "ID of the target device, in [0, 4095]",
       .on_cpu =
           "none: this engine has one CPU device, and device IDs choose among GPU/Ascend cards"},
      {.name = "device_target",
       .type = VT::kChoice,
       .default_value = "CPU",
       .example = "cpu",
       .choices = {"CPU", "GPU", "Ascend"},
       .ignore_case = true,
       .doc = "Target device; this build runs on CPU only (GPU and Ascend are rejected)",
       .on_cpu = "CPU is the only target of this build; GPU and Ascend are rejected",
       .check = check_device_target},
      {.name = "max_device_memory",
       .type = VT::kMemorySize,
       .default_value = "1024GB",
       .example = "3.5GB",
       .devices = kGpu | kAscend,
       .doc = "Maximum memory the engine may hold, \"xxGB\" (CPU: the allocator's limit)",
       .on_cpu = "the memory pool's limit: an allocation beyond it fails with OutOfMemory"},
      {.name = "variable_memory_max_size",
       .type = VT::kMemorySize,
       .default_value = "1024GB",
       .example = "6GB",
       .devices = kAscend,
       .doc = "Deprecated; sets max_device_memory",
       .on_cpu = "sets max_device_memory (deprecated alias)",
       .deprecated = "'variable_memory_max_size' is deprecated and will be removed; it now sets "
                     "'max_device_memory', use that instead",
       .alias_of = "max_device_memory"},
      {.name = "mempool_block_size",
       .type = VT::kMemorySize,
       .default_value = "1GB",
       .example = "2GB",
       .min_gb = 1,
       .devices = kGpu | kAscend,
       .doc = "Block size of the memory pool, \"xxGB\", at least 1GB (CPU: the pool's block size)",
       .on_cpu = "the size of the blocks the memory pool takes from the system"},
      {.name = "op_timeout",
       .type = VT::kInt,
       .default_value = 900,
       .example = 60,
       .min = 0,
       .devices = kGpu | kAscend,
       .effective_on_cpu = false,
       .doc = "Maximum execution time of one operator in seconds; 0 means the device default",
       .on_cpu = "none: CPU kernels run on the calling threads and have no device-side watchdog to "
                 "time out"},
      // Debug configuration.
      {.name = "save_graphs",
       .type = VT::kSaveGraphs,
       .default_value = 0,
       .example = 2,
       .doc =
           "Save intermediate graphs: 0/false none, 1 key stages, 2/true every pass, 3 + Graphviz",
       .on_cpu = "writes .ir (and at 3 Graphviz .dot) files of every compile; in PYNATIVE_MODE, of "
                 "jit-compiled parts"},
      {.name = "save_graphs_path",
       .type = VT::kString,
       .default_value = ".",
       .example = "./ir",
       .doc = "Directory for saved graphs (rank_<id>/ below it when device_num > 1); created if "
              "missing",
       .on_cpu = "the directory of the save_graphs files",
       .check = check_save_graphs_path},
      {.name = "enable_dump",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Deprecated; no effect",
       .on_cpu = "none: MindSpore's dump of Ascend data has no CPU counterpart here",
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
       .on_cpu = "none: deprecated, and enable_dump has no effect",
       .deprecated =
           "'save_dump_path' is deprecated and will be removed in the next version; it has "
           "no effect"},
      {.name = "deterministic",
       .type = VT::kChoice,
       .default_value = "OFF",
       .example = "ON",
       .choices = {"ON", "OFF"},
       .devices = kAscend,
       .doc = "Deterministic operators, ON or OFF (CPU: fixed reduction order and thread split)",
       .on_cpu = "ON: the same bits for any thread count (fixed reduction splits, fixed matmul "
                 "blocks); OFF: faster orders that may change bits with the thread count"},
      {.name = "print_file_path",
       .type = VT::kString,
       .default_value = "",
       .example = "print.pb",
       .devices = kAscend,
       .doc = "File that receives Print output; empty prints to the screen (CPU: honoured)",
       .on_cpu =
           "the print op writes to this file instead of the screen (an existing file is kept: "
           "a new one, PATH_MILLISECONDS, is written beside it)",
       .check = check_print_file_path},
      {.name = "env_config_path",
       .type = VT::kString,
       .default_value = "",
       .example = "",
       .doc = "JSON file with {\"rdr\": {enable, mode, path}, \"sys\": {\"mem_Reuse\": bool}}",
       .on_cpu = "rdr: the Running Data Recorder writes a report for every compiled run (and "
                 "PYNATIVE failure); sys.mem_Reuse=false turns off buffer reuse at "
                 "memory_optimize_level=O1 (O0 pools every tensor anyway)"},
      {.name = "precompile_only",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "Compile (and dump) networks but do not execute them",
       .on_cpu = "networks are compiled (and dumped) but not run"},
      {.name = "reserve_class_name_in_scope",
       .type = VT::kBool,
       .default_value = true,
       .example = false,
       .compile_relevant = true,
       .doc = "Keep class names in scope names: Default/net-Net1 rather than Default/net",
       .on_cpu = "class names in node scopes (dumps, error messages): Default/net-Mlp/fc1-Dense"},
      {.name = "pynative_synchronize",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "PYNATIVE: run each op before the call returns, so errors name the call site",
       .on_cpu = "PYNATIVE_MODE: each op runs before its call returns, so an error is thrown at "
                 "the call site"},
      {.name = "debug_level",
       .type = VT::kChoice,
       .default_value = "RELEASE",
       .example = "DEBUG",
       .choices = {"RELEASE", "DEBUG"},
       .choice_by_index = true,
       .doc = "RELEASE drops some debug information for faster compiles; DEBUG keeps it",
       .on_cpu = "DEBUG: verify the graph after every pass, source locations and scope chains in "
                 "every dump, and a failing graph written as .ir beside its error report"},
      // Execution control.
      {.name = "mode",
       .type = VT::kMode,
       .default_value = 1,
       .example = "GRAPH_MODE",
       .doc = "GRAPH_MODE (0) compiles whole graphs; PYNATIVE_MODE (1) runs op by op",
       .on_cpu = "GRAPH_MODE traces and compiles whole networks; PYNATIVE_MODE runs op by op"},
      {.name = "enable_graph_kernel",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .devices = kAscend | kGpu,
       .compile_relevant = true,
       .doc = "Turn on graph-kernel fusion at opt_level 2 (CPU: fuses elementwise/reduce chains)",
       .on_cpu = "turns on graph-kernel fusion at opt_level 2"},
      {.name = "graph_kernel_flags",
       .type = VT::kString,
       .default_value = "",
       .example = "--opt_level=3 --dump_as_text",
       .devices = kAscend | kGpu,
       .compile_relevant = true,
       .doc = "Fusion options such as \"--opt_level=2 --dump_as_text\"; beat enable_graph_kernel "
              "(CPU: honoured)",
       .on_cpu = "fusion options; unknown flags are warned about and ignored",
       .check = check_graph_kernel_flags,
       .warnings = graph_kernel_flags_warnings},
      {.name = "enable_reduce_precision",
       .type = VT::kBool,
       .default_value = true,
       .example = false,
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Lower precision automatically when an operator lacks the requested one",
       .on_cpu = "none: every CPU kernel supports the dtypes it is given, so no precision is ever "
                 "lowered"},
      {.name = "aoe_tune_mode",
       .type = VT::kChoice,
       .default_value = "",
       .example = "online",
       .choices = {"online", "offline"},
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "AOE tuning: online, or offline (saves GE graphs); not set by default",
       .on_cpu =
           "none: AOE tunes Ascend operators; CPU kernels are chosen by oneDNN at compile time"},
      {.name = "aoe_config",
       .type = VT::kDict,
       .default_value = Json::object(),
       .example = Json{{"job_type", "1"}},
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Parameters of the AOE tool",
       .on_cpu = "none: parameters of AOE, which has no effect on CPU",
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
       .doc = "Check that back-propagation outputs match their inputs' shape and dtype",
       .on_cpu = "checks a cell's custom bprop: one gradient per input, each of its input's shape "
                 "and dtype"},
      {.name = "max_call_depth",
       .type = VT::kInt,
       .default_value = 1000,
       .example = 80,
       .min = 1,
       // Any positive int, as MindSpore takes (scripts set 10000 and 100000): how deep a thread
       // can really go is not a number the context can know, so each level checks the stack left
       // (base/stack_guard.h) and a chain deeper than the stack stops with a clear error.
       .doc = "Maximum depth of nested calls while tracing, compiling and running; any positive "
              "int (a chain deeper than the thread's stack holds stops with an error first: about "
              "4000 levels op by op on the default 8 MiB stack)",
       .on_cpu = "limits nested calls while tracing, compiling and running (an error beyond it)"},
      {.name = "grad_for_scalar",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "Allow gradients with respect to scalar inputs",
       .on_cpu = "Python int and float arguments of a differentiated function become inputs with "
                 "gradients (off: constants, dropped from the gradients)"},
      {.name = "enable_compile_cache",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "Store compiled graphs and load them again when nothing compile-relevant changed",
       .on_cpu = "stores compiled graphs and plans, and loads them when nothing compile-relevant "
                 "changed"},
      {.name = "compile_cache_path",
       .type = VT::kString,
       .default_value = ".",
       .example = "./cache",
       .doc = "Directory of the compile cache (entries go to rank_<id>/ below it)",
       .on_cpu = "the directory of the compile cache"},
      {.name = "inter_op_parallel_num",
       .type = VT::kInt,
       .default_value = 0,
       .example = 2,
       .min = 0,
       .doc = "How many independent nodes may run at once; 0 lets the engine choose",
       .on_cpu =
           "how many independent nodes run at once (both executors); 0 is the engine's default"},
      {.name = "runtime_num_threads",
       .type = VT::kInt,
       .default_value = 30,
       .example = 4,
       .min = 0,
       .doc = "Threads of the intra-op pool, capped to the machine's cores; 0 means all cores",
       .on_cpu = "threads of the intra-op pool, capped to the machine's cores"},
      {.name = "disable_format_transform",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .compile_relevant = true,
       .doc = "Disable the automatic NCHW to NHWC format transform",
       .on_cpu = "compiled graphs run the format-transform pass (float32 convolutions and pools "
                 "keep channels-last activations between them), and op by op those ops leave "
                 "channels-last tensors for the next; true turns both off"},
      {.name = "support_binary",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .effective_on_cpu = false,
       .doc = "Run compiled Python (.pyc/.so) in GRAPH_MODE; no meaning for a C++ engine",
       .on_cpu = "none: modeflow traces C++ networks and never reads Python source"},
      {.name = "memory_optimize_level",
       .type = VT::kChoice,
       .default_value = "O0",
       .example = "O1",
       .choices = {"O0", "O1"},
       .compile_relevant = true,
       .doc = "O0 pools memory per tensor; O1 plans offsets with reuse (SOMAS-like)",
       .on_cpu =
           "O0 pools each tensor and frees it after its last use; O1 plans offsets in one arena"},
      {.name = "memory_offload",
       .type = VT::kChoice,
       .default_value = "OFF",
       .example = "ON",
       .choices = {"ON", "OFF"},
       .devices = kGpu | kAscend,
       .effective_on_cpu = false,
       .doc = "Copy idle data to host memory when device memory runs short",
       .on_cpu = "none: host memory is the only memory, so there is nowhere to offload to"},
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
       .on_cpu = "none: Ascend-only options",
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
       .choice_by_index = true,
       .effective_on_cpu = false,
       .doc = "Syntax accepted by graph compilation: STRICT, COMPATIBLE or LAX",
       .on_cpu = "none: cells are traced as they run (Python's construct included), never parsed, "
                 "so every Python construct a trace can record is taken at any level"},
      // MindSpore 2.6's set_context documents it (its docstring sets exec_order="bfs"); newer than
      // the seed pages, and Ascend-only there.
      {.name = "exec_order",
       .type = VT::kChoice,
       .default_value = "bfs",
       .example = "dfs",
       .choices = {"bfs", "dfs", "gpto"},
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Order of kernel execution in GRAPH_MODE: bfs, dfs or gpto (Ascend)",
       .on_cpu = "none: compiled graphs run in topological order, independent nodes as "
                 "inter_op_parallel_num allows"},
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
       .on_cpu = "none: cuDNN/cuBLAS options",
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
       .on_cpu = "jit_level chooses the passes and executor; infer_boost=on compiles the weights "
                 "in as constants (folded, convolution weights reordered once)",
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
       .on_cpu = "none: profiling is done with a profiler, not a context key",
       .deprecated = "'enable_profiling' is deprecated and will be removed; it has no effect"},
      {.name = "profiling_options",
       .type = VT::kString,
       .default_value = "",
       .example = "{\"output\": \"/tmp/prof\"}",
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Deprecated; use a profiler instead",
       .on_cpu = "none: profiling is done with a profiler, not a context key",
       .deprecated = "'profiling_options' is deprecated and will be removed; it has no effect"},
      {.name = "enable_sparse",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .effective_on_cpu = false,
       .doc = "Deprecated; sparse tensors need no switch",
       .on_cpu = "none: sparse tensors need no switch",
       .deprecated = "'enable_sparse' is deprecated and will be removed; it has no effect"},
      {.name = "auto_tune_mode",
       .type = VT::kChoice,
       .default_value = "NO_TUNE",
       .example = "GA",
       .choices = {"NO_TUNE", "RL", "GA", "RL,GA", "GA,RL"},
       .devices = kAscend,
       .effective_on_cpu = false,
       .doc = "Deprecated; use aoe_tune_mode",
       .on_cpu = "none: deprecated; AOE tuning has no effect on CPU",
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
       .doc = "Number of devices, in [1, 4096]",
       .on_cpu = "dumps and cache entries go to rank_<global_rank>/ when above 1"},
      {.name = "global_rank",
       .type = VT::kInt,
       .default_value = 0,
       .example = 3,
       .min = 0,
       .max = 4095,
       .doc = "Global rank of this process, in [0, 4095]",
       .on_cpu = "names the rank_<id>/ directory of dumps and the compile cache"},
      {.name = "gradients_mean",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .doc = "Divide gradients by device_num after all-reduce",
       .on_cpu = "data_parallel: TrainOneStepCell divides the all-reduced gradients by the "
                 "number of workers"},
      {.name = "gradient_fp32_sync",
       .type = VT::kBool,
       .default_value = true,
       .example = false,
       .effective_on_cpu = false,
       .doc = "All-reduce gradients in fp32",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "loss_repeated_mean",
       .type = VT::kBool,
       .default_value = true,
       .example = false,
       .effective_on_cpu = false,
       .doc = "Take the mean of a repeatedly computed loss",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "parallel_mode",
       .type = VT::kChoice,
       .default_value = "stand_alone",
       .example = "data_parallel",
       .choices = {"stand_alone", "data_parallel", "hybrid_parallel", "semi_auto_parallel",
                   "auto_parallel"},
       .ignore_case = true,
       .doc = "stand_alone, data_parallel, hybrid_parallel, semi_auto_parallel or auto_parallel",
       .on_cpu = "data_parallel: TrainOneStepCell all-reduces gradients over the workers; "
                 "hybrid_parallel: the network's own collectives run; semi_auto_parallel and "
                 "auto_parallel run as stand_alone, with a warning"},
      {.name = "search_mode",
       .type = VT::kChoice,
       .default_value = "dynamic_programming",
       .example = "sharding_propagation",
       .choices = {"recursive_programming", "dynamic_programming", "sharding_propagation"},
       .effective_on_cpu = false,
       .doc = "Strategy search of auto_parallel",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "auto_parallel_search_mode",
       .type = VT::kChoice,
       .default_value = "dynamic_programming",
       .example = "recursive_programming",
       .choices = {"recursive_programming", "dynamic_programming", "sharding_propagation"},
       .doc = "Deprecated; sets search_mode",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure",
       .deprecated =
           "'auto_parallel_search_mode' is deprecated; it now sets 'search_mode', use that "
           "instead",
       .alias_of = "search_mode"},
      {.name = "parameter_broadcast",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .effective_on_cpu = false,
       .doc = "Broadcast device 0's parameters before training",
       .on_cpu = "none: data_parallel always broadcasts worker 0's parameters at the first "
                 "training step"},
      {.name = "strategy_ckpt_load_file",
       .type = VT::kString,
       .default_value = "",
       .example = "./strategy.ckpt",
       .effective_on_cpu = false,
       .doc = "Parallel strategy checkpoint to load",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "strategy_ckpt_save_file",
       .type = VT::kString,
       .default_value = "",
       .example = "./strategy.ckpt",
       .effective_on_cpu = false,
       .doc = "Parallel strategy checkpoint to save",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "full_batch",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .effective_on_cpu = false,
       .doc = "Each device loads the whole batch (prefer dataset_strategy)",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "dataset_strategy",
       .type = VT::kStrategy,
       .default_value = "data_parallel",
       .example = Json::array({Json::array({1, 8}), Json::array({1, 8})}),
       .choices = {"data_parallel", "full_batch"},
       .effective_on_cpu = false,
       .doc = "\"data_parallel\", \"full_batch\" or a tuple of per-input shard tuples",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "enable_parallel_optimizer",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .effective_on_cpu = false,
       .doc = "Shard the optimizer's weight update",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "all_reduce_fusion_config",
       .type = VT::kIntList,
       .default_value = Json::array(),
       .example = Json::array({8, 160}),
       .doc = "Gradient indices that split all-reduce fusion groups, ascending; empty = off",
       .on_cpu = "data_parallel: the gradient indices where a new all-reduce bucket starts"},
      {.name = "pipeline_stages",
       .type = VT::kInt,
       .default_value = 1,
       .example = 2,
       .min = 1,
       .effective_on_cpu = false,
       .doc = "Number of pipeline stages (semi_auto_parallel)",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "grad_accumulation_step",
       .type = VT::kInt,
       .default_value = 1,
       .example = 4,
       .min = 1,
       .effective_on_cpu = false,
       .doc = "Gradient accumulation steps, a positive integer",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure"},
      {.name = "parallel_optimizer_config",
       .type = VT::kDict,
       .default_value =
           Json{{"gradient_accumulation_shard", true}, {"parallel_optimizer_threshold", 64}},
       .example = Json{{"gradient_accumulation_shard", false}},
       .effective_on_cpu = false,
       .doc = "Details of the parallel optimizer",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure",
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
       .effective_on_cpu = false,
       .doc = "{\"allreduce\"|\"allgather\"|\"reducescatter\": {\"mode\": auto|size|index, "
              "\"config\": ...}}",
       .on_cpu = "none: modeflow runs one process on one device; there is no distributed training "
                 "to configure",
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
       .on_cpu = "none: parameter-server training is not available in this build",
       .check = check_enable_ps},
      {.name = "config_file_path",
       .type = VT::kString,
       .default_value = "",
       .example = "./recovery.json",
       .effective_on_cpu = false,
       .doc = "Configuration file for server disaster recovery",
       .on_cpu = "none: parameter-server training is not available in this build"},
      {.name = "scheduler_manage_port",
       .type = VT::kInt,
       .default_value = 11202,
       .example = 11203,
       .min = 1,
       .max = 65535,
       .effective_on_cpu = false,
       .doc = "Scheduler port for scaling",
       .on_cpu = "none: parameter-server training is not available in this build"},
      {.name = "enable_ssl",
       .type = VT::kBool,
       .default_value = false,
       .example = true,
       .effective_on_cpu = false,
       .doc = "SSL between workers and servers",
       .on_cpu = "none: parameter-server training is not available in this build"},
      {.name = "client_password",
       .type = VT::kString,
       .default_value = "",
       .example = "123456",
       .effective_on_cpu = false,
       .doc = "Password of the client certificate's key",
       .on_cpu = "none: parameter-server training is not available in this build"},
      {.name = "server_password",
       .type = VT::kString,
       .default_value = "",
       .example = "123456",
       .effective_on_cpu = false,
       .doc = "Password of the server certificate's key",
       .on_cpu = "none: parameter-server training is not available in this build"},
  };
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

std::string no_effect_warning(const KeySpec& spec) {
  std::string_view why = spec.on_cpu;
  if (why.starts_with("none: ")) why.remove_prefix(6);
  return "'" + spec.name + "' (" + spec.doc + ") has no effect here: " + std::string(why) +
         ". The value is kept, and `mf context explain` lists it as ignored";
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
