#include "context/store.h"

#include <mutex>
#include <shared_mutex>

#include "base/error.h"
#include "base/logging.h"
#include "context/value_parsing.h"

namespace mf::context::detail {
namespace {

struct Store {
  std::shared_mutex mutex;
  std::shared_ptr<const State> state = std::make_shared<const State>(default_state());
};

Store& store() {
  static Store instance;
  return instance;
}

void note_effects(const KeySpec& spec, std::string_view api,
                  std::vector<PendingWarning>& warnings) {
  if (!spec.deprecated.empty()) {
    warnings.push_back({std::string(api) + ":deprecated:" + spec.name, spec.deprecated});
  } else if (!spec.effective_on_cpu) {
    warnings.push_back({std::string(api) + ":no-effect:" + spec.name, no_effect_warning(spec)});
  }
}

}  // namespace

State default_state() {
  State state;
  state.values = defaults_of(context_keys());
  state.auto_parallel = defaults_of(auto_parallel_keys());
  state.ps = defaults_of(ps_keys());
  return state;
}

std::shared_ptr<const State> current_state() {
  std::shared_lock lock(store().mutex);
  return store().state;
}

void update_state(const std::function<void(State&, std::vector<PendingWarning>&)>& change) {
  std::vector<PendingWarning> warnings;
  {
    std::unique_lock lock(store().mutex);
    auto next = std::make_shared<State>(*store().state);
    change(*next, warnings);  // throws before anything is published
    next->version = store().state->version + 1;
    store().state = std::move(next);
  }
  for (const auto& warning : warnings) log::warn_once(warning.once_key, warning.message);
}

void apply_key(std::string_view api, const std::vector<KeySpec>& table, Json& target,
               std::string_view key, const Json& value, std::vector<PendingWarning>& warnings) {
  const std::size_t dot = key.find('.');
  const std::string_view name = key.substr(0, dot);
  const KeySpec* spec = find_key(table, name);
  if (spec == nullptr) fail_unknown_key(api, table, name);
  if (dot == std::string_view::npos) {
    Json normalized = normalize_value(api, *spec, value);
    if (spec->warnings != nullptr) {
      for (std::string& message : spec->warnings(normalized)) {
        warnings.push_back({std::string(api) + ":value:" + spec->name + ":" + message, message});
      }
    }
    target[spec->alias_of.empty() ? spec->name : spec->alias_of] = std::move(normalized);
  } else {
    // A dotted key changes one sub-key and keeps the others, unlike a whole dict, which replaces.
    MF_CHECK(spec->type == ValueType::kDict, InvalidArgument, "For '", api, "', '", spec->name,
             "' is a ", type_name(*spec), ", not a dict, so '", key, "' names nothing");
    const std::string_view sub_name = key.substr(dot + 1);
    const KeySpec* sub = find_key(spec->sub_keys, sub_name);
    if (sub == nullptr) fail_unknown_key(api, spec->sub_keys, sub_name, spec->name);
    if (value.is_null() && sub->default_value.is_null()) {
      target[spec->name].erase(sub->name);
    } else {
      target[spec->name][sub->name] = normalize_value(api, *sub, value, key);
    }
  }
  note_effects(*spec, api, warnings);
}

void set_context_key(State& state, std::string_view api, std::string_view key, const Json& value,
                     std::vector<PendingWarning>& warnings) {
  const std::string top(key.substr(0, key.find('.')));
  if (state.pinned.contains(top) && api != state.pinned[top]["by"].get<std::string>()) {
    // Still checked, so a bad value is an error whatever the environment says.
    Json scratch = state.values;
    apply_key(api, context_keys(), scratch, key, value, warnings);
    const std::string variable = state.pinned[top]["by"];
    warnings.push_back({"pinned:" + top + ":" + std::string(api),
                        "'" + top + "' is set by the environment variable " + variable +
                            ", which wins over " + std::string(api) + " (as in MindSpore); unset " +
                            variable + " to set it here"});
    return;
  }
  apply_key(api, context_keys(), state.values, key, value, warnings);
  if (top == "jit_config") {
    // MindSpore 2.6 raises here; modeflow keeps infer_boost at every level as an extension
    // (weights compiled in as constants), and says so.
    const Json& jit = state.values["jit_config"];
    const std::string level = jit.value("jit_level", "");
    if (jit.value("infer_boost", "off") == "on" && (level == "O1" || level == "O2")) {
      warnings.push_back(
          {"infer_boost:" + level,
           "jit_config: infer_boost='on' with jit_level " + level +
               " is accepted here as an extension (weights compiled in as constants at every "
               "level); MindSpore 2.6 refuses it ('Only jit_level set O0 can set infer_boost to "
               "on'): use jit_level O0 for scripts that must also run there"});
    }
  }
  const KeySpec* spec = find_key(context_keys(), top);
  state.origins[spec != nullptr && !spec->alias_of.empty() ? spec->alias_of : top] =
      std::string(api);
}

Json lookup_key(std::string_view api, const std::vector<KeySpec>& table, const Json& values,
                std::string_view key) {
  const std::size_t dot = key.find('.');
  const std::string_view name = key.substr(0, dot);
  const KeySpec* spec = find_key(table, name);
  if (spec == nullptr) fail_unknown_key(api, table, name);
  const Json& value = values.at(spec->alias_of.empty() ? spec->name : spec->alias_of);
  if (dot == std::string_view::npos) return value;
  MF_CHECK(spec->type == ValueType::kDict, InvalidArgument, "For '", api, "', '", spec->name,
           "' is a ", type_name(*spec), ", not a dict, so '", key, "' names nothing");
  const std::string_view sub_name = key.substr(dot + 1);
  const KeySpec* sub = find_key(spec->sub_keys, sub_name);
  if (sub == nullptr) fail_unknown_key(api, spec->sub_keys, sub_name, spec->name);
  return value.value(sub->name, Json());  // null: a sub-key that is not set
}

}  // namespace mf::context::detail
