#pragma once
// The key tables: every key of set_context, set_auto_parallel_context and set_ps_context, declared
// once. Validation, `mf context list`, defaults, warnings and the fingerprint all walk these
// tables.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mf::context {

using Json = nlohmann::json;

// How a key's value is checked and converted (value_parsing.cc holds one rule per kind).
enum class ValueType {
  kBool,        // true/false only (from text: true/false/1/0)
  kInt,         // an integer within [min, max]
  kString,      // any string
  kChoice,      // one string of `choices` (compared case-sensitively unless `ignore_case`)
  kMode,        // 0/1 or GRAPH_MODE/PYNATIVE_MODE; stored as the int
  kSaveGraphs,  // bool (true = 2, false = 0) or 0..3; stored as the int
  kMemorySize,  // "xxGB" with at least `min_gb`; stored as given
  kIntList,     // a list of integers (all_reduce_fusion_config)
  kStrategy,    // dataset_strategy: one of `choices` or a list of lists of positive ints
  kDict,        // an object whose sub-keys are declared in `sub_keys`
  kOpaqueDict,  // an object of free-form entries whose values are checked by `check` (ge_options,
                // comm_fusion)
};

// The devices the MindSpore documents list a key for.
enum Device : unsigned { kCpu = 1u, kGpu = 2u, kAscend = 4u, kAllDevices = 7u };

struct KeySpec;
// An extra check for a kOpaqueDict value; throws mf::Error naming `api` and the key.
using ExtraCheck = void (*)(std::string_view api, const KeySpec& spec, const Json& value);
// Warnings a valid value still deserves (an unknown graph_kernel_flags flag, which is ignored).
using ValueWarnings = std::vector<std::string> (*)(const Json& value);

// One key (or one sub-key of a dict key).
struct KeySpec {
  std::string name;
  ValueType type = ValueType::kString;
  Json default_value;  // null for a dict sub-key that is "not set" by default
  Json example;        // a valid non-default value: docs, tests, and `mf context list`
  std::vector<std::string> choices;  // kChoice / kStrategy
  // kChoice: MindSpore's integer constants are accepted too, the i-th choice for integer i
  // (jit_syntax_level: ms.STRICT = 0, ms.COMPATIBLE = 1, ms.LAX = 2; debug_level: RELEASE = 0,
  // DEBUG = 1), and stored as the choice's name.
  bool choice_by_index = false;
  bool ignore_case = false;         // kChoice: accept any case, store the canonical spelling
  std::optional<std::int64_t> min;  // kInt
  std::optional<std::int64_t> max;  // kInt
  double min_gb = 0;                // kMemorySize: strictly above 0, at least this
  unsigned devices = kAllDevices;   // as documented by MindSpore
  // Has a real effect in this CPU engine (may differ from `devices`). When false, setting the key
  // away from its default warns once, naming what it would do and why it does nothing here.
  bool effective_on_cpu = true;
  // Can change the compiled graph or its memory plan: part of the compile fingerprint (a test
  // toggles every key and compiles, tests/context/key_walk_test.cc).
  bool compile_relevant = false;
  std::string doc;  // one line
  // What the key does in this engine on CPU, or ("none: ...") why it does nothing here. The key
  // table (docs/context-keys.md) and the no-effect warning quote it.
  std::string on_cpu;
  std::string deprecated;            // non-empty: the warning printed when the key is set
  std::string alias_of;              // a deprecated key that writes another key instead
  std::vector<KeySpec> sub_keys;     // kDict
  ExtraCheck check = nullptr;        // kOpaqueDict, or any extra rule
  ValueWarnings warnings = nullptr;  // printed once each when the value is set
};

// The keys of context::set (mindspore.set_context), in documentation order.
const std::vector<KeySpec>& context_keys();
// The keys of set_auto_parallel_context.
const std::vector<KeySpec>& auto_parallel_keys();
// The keys of set_ps_context.
const std::vector<KeySpec>& ps_keys();

// The spec named `name` in `table` (or among a dict's sub-keys), or nullptr.
const KeySpec* find_key(const std::vector<KeySpec>& table, std::string_view name);

// The warning for setting an inert key (effective_on_cpu false): what it would do and why not here.
std::string no_effect_warning(const KeySpec& spec);

// Levenshtein distance: the "did you mean" measure for keys and graph_kernel_flags flags.
std::size_t edit_distance(std::string_view a, std::string_view b);

// Up to three names of `table` closest to `name` by edit distance, nearest first ("did you mean").
std::vector<std::string> closest_keys(const std::vector<KeySpec>& table, std::string_view name);

// "bool", "int", "str", "dict", "int|str", ... as shown by `mf context list`.
std::string type_name(const KeySpec& spec);
// "CPU/GPU/Ascend", "GPU/Ascend", ... in the documents' spelling.
std::string device_names(unsigned devices);
// A readable list of what the key accepts: "0..3 or true/false", "ON, OFF", "[0, 4095]", ...
std::string allowed_values(const KeySpec& spec);

// The default value of a whole table as one object (dict keys hold their sub-keys' defaults).
Json defaults_of(const std::vector<KeySpec>& table);

}  // namespace mf::context
