// modeflow.set_context and friends: MindSpore's argument forms (keyword arguments, dicts for
// jit_config and ascend_config) over context::set/get/reset. The engine's message is kept word for
// word; the exception type is MindSpore's: TypeError when a value has the wrong Python type for its
// key, ValueError for an unknown key or a bad value.
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "base/error.h"
#include "bindings.h"
#include "context/key_table.h"
#include "context/parallel_context.h"
#include "context/replacement_api.h"

namespace mf::python {
namespace {

using context::Json;
using context::KeySpec;
using context::ValueType;

bool type_fits(const KeySpec& spec, const Json& value) {
  switch (spec.type) {
    case ValueType::kBool:
      return value.is_boolean();
    case ValueType::kInt:
      return value.is_number_integer();
    case ValueType::kChoice:
      // MindSpore's integer constants (ms.STRICT, ms.context.DEBUG) are of the right type.
      return value.is_string() || (spec.choice_by_index && value.is_number_integer());
    case ValueType::kString:
    case ValueType::kMemorySize:
      return value.is_string();
    case ValueType::kMode:
      return value.is_number_integer() || value.is_string();
    case ValueType::kSaveGraphs:
      return value.is_boolean() || value.is_number_integer();
    case ValueType::kIntList:
      return value.is_array();
    case ValueType::kStrategy:
      return value.is_string() || value.is_array();
    case ValueType::kDict:
    case ValueType::kOpaqueDict:
      return value.is_object();
  }
  return true;
}

// True when some known key (or dict sub-key, or dotted "jit_config.jit_level") holds a value of a
// Python type its key never accepts.
bool has_type_mismatch(const std::vector<KeySpec>& table, const Json& values) {
  if (!values.is_object()) return false;
  for (const auto& [key, value] : values.items()) {
    const size_t dot = key.find('.');
    const KeySpec* spec = context::find_key(table, key.substr(0, dot));
    if (spec == nullptr) continue;
    if (dot != std::string::npos) {
      if (has_type_mismatch(spec->sub_keys, Json{{key.substr(dot + 1), value}})) return true;
      continue;
    }
    if (!type_fits(*spec, value)) return true;
    if (spec->type == ValueType::kDict && has_type_mismatch(spec->sub_keys, value)) return true;
  }
  return false;
}

// Runs a setter: engine errors about a value's type become TypeError, the rest keep their mapping.
template <typename Setter>
void set_with(const std::vector<KeySpec>& table, const py::kwargs& kwargs, Setter setter) {
  const Json values = to_json(kwargs);
  try {
    setter(values);
  } catch (const Error& error) {
    if (error.kind() == ErrorKind::kInvalidArgument && has_type_mismatch(table, values)) {
      throw py::type_error(error.what());
    }
    throw;
  }
  flush_warnings();
}

template <typename Getter>
py::object get_with(const std::string& key, Getter getter) {
  py::object value = from_json(getter(key));
  flush_warnings();
  return value;
}

}  // namespace

void bind_context(py::module_& m) {
  m.attr("GRAPH_MODE") = 0;
  m.attr("PYNATIVE_MODE") = 1;

  m.def(
      "set_context",
      [](py::kwargs kwargs) {
        set_with(context::context_keys(), kwargs, [](const Json& v) { context::set(v); });
      },
      "Sets context keys (all or nothing): mode, jit_config={'jit_level': 'O1'}, save_graphs, ... "
      "ValueError for an unknown key or a bad value, TypeError for a value of the wrong type.");
  m.def(
      "get_context", [](const std::string& key) { return get_with(key, context::get); },
      py::arg("attr_key"),
      "The value of a context key ('mode', 'jit_config' or 'jit_config.jit_level', ...).");
  m.def(
      "reset_context", [] { context::reset(); }, "Restores every set_context key's default.");

  m.def(
      "set_auto_parallel_context",
      [](py::kwargs kwargs) {
        set_with(context::auto_parallel_keys(), kwargs,
                 [](const Json& v) { context::set_auto_parallel_context(v); });
      },
      "Sets auto-parallel keys (device_num, global_rank, parallel_mode, ...).");
  m.def(
      "get_auto_parallel_context",
      [](const std::string& key) { return get_with(key, context::get_auto_parallel_context); },
      py::arg("attr_key"));
  m.def("reset_auto_parallel_context", [] { context::reset_auto_parallel_context(); });

  m.def(
      "set_ps_context",
      [](py::kwargs kwargs) {
        set_with(context::ps_keys(), kwargs, [](const Json& v) { context::set_ps_context(v); });
      },
      "Sets parameter-server keys; enable_ps=True is unsupported on this CPU engine.");
  m.def(
      "get_ps_context",
      [](const std::string& key) { return get_with(key, context::get_ps_context); },
      py::arg("attr_key"));
  m.def("reset_ps_context", [] { context::reset_ps_context(); });

  // MindSpore 2.5+'s replacements for set_context keys: each sets the same key through the same
  // checks (context/replacement_api.h). The runtime and device_context ones are re-exported by
  // `import modeflow` reads MindSpore's MS_* variables, as `mf` does at start-up.
  m.def(
      "_configure_from_environment",
      [] {
        configure_from_environment();
        flush_warnings();
      },
      "Reads MS_DEV_SAVE_GRAPHS, MS_DEV_SAVE_GRAPHS_PATH, MS_DEV_PRECOMPILE_ONLY, "
      "MS_DEV_GRAPH_KERNEL_FLAGS, MS_COMPILER_CACHE_ENABLE and MS_COMPILER_CACHE_PATH.");
  // modeflow.runtime and modeflow.device_context.cpu.op_tuning under MindSpore's names.
  m.def(
      "set_device",
      [](const std::string& device_target, std::optional<int> device_id) {
        set_device(device_target, device_id);
        flush_warnings();
      },
      py::arg("device_target"), py::arg("device_id") = py::none(),
      "Sets device_target (and device_id), as set_context would.");
  m.def(
      "set_deterministic",
      [](bool on) {
        set_deterministic(on);
        flush_warnings();
      },
      py::arg("deterministic"), "deterministic='ON' (True) or 'OFF' (False).");
  m.def(
      "set_recursion_limit",
      [](int limit) {
        set_recursion_limit(limit);
        flush_warnings();
      },
      py::arg("recursion_limit") = 1000, "max_call_depth.");
  m.def(
      "_runtime_set_memory",
      [](const std::string& init_size, const std::string& increase_size,
         const std::string& max_size, const std::string& optimize_level,
         const std::string& huge_page_reserve_size) {
        context::runtime::set_memory(init_size, increase_size, max_size, optimize_level,
                                     huge_page_reserve_size);
        flush_warnings();
      },
      py::arg("init_size") = "2GB", py::arg("increase_size") = "2GB",
      py::arg("max_size") = "1024GB", py::arg("optimize_level") = "O0",
      py::arg("huge_page_reserve_size") = "0GB",
      "MindSpore 2.6's runtime.set_memory: arguments left out take their defaults again.");
  m.def("_runtime_launch_blocking", [] {
    context::runtime::launch_blocking();
    flush_warnings();
  });
  m.def(
      "_runtime_dispatch_threads_num",
      [](int n) {
        context::runtime::dispatch_threads_num(n);
        flush_warnings();
      },
      py::arg("num_threads"));
  m.def(
      "_op_tuning_threads_num",
      [](int n) {
        context::device_context::cpu::op_tuning::threads_num(n);
        flush_warnings();
      },
      py::arg("num_threads"));
}

}  // namespace mf::python
