#include "context/context.h"

#include "base/error.h"
#include "context/json_file.h"
#include "context/store.h"
#include "context/value_parsing.h"

namespace mf::context {
namespace {

using detail::PendingWarning;
using detail::State;

// The two nested contexts that set(), files and --set reach through a prefix.
constexpr std::string_view kAutoParallelPrefix = "auto_parallel_context";
constexpr std::string_view kPsPrefix = "ps_context";

// Applies one top-level entry of a set() change to `state`.
void apply_entry(State& state, std::string_view key, const Json& value,
                 std::vector<PendingWarning>& warnings) {
  for (const auto& [prefix, api, table, target] :
       {std::tuple{kAutoParallelPrefix, kSetAutoParallelApi, &auto_parallel_keys(),
                   &state.auto_parallel},
        std::tuple{kPsPrefix, kSetPsApi, &ps_keys(), &state.ps}}) {
    if (key == prefix) {
      MF_CHECK(value.is_object(), InvalidArgument, "For '", kSetContextApi, "', '", prefix,
               "' must be a dict of ", api, " keys, but got ", echo(describe(value)), ".");
      for (const auto& [name, item] : value.items()) {
        detail::apply_key(api, *table, *target, name, item, warnings);
      }
      return;
    }
    if (key.starts_with(prefix) && key.size() > prefix.size() && key[prefix.size()] == '.') {
      detail::apply_key(api, *table, *target, key.substr(prefix.size() + 1), value, warnings);
      return;
    }
  }
  detail::set_context_key(state, kSetContextApi, key, value, warnings);
}

// Validates a whole change into `state`; re-reads env_config_path when the change names it.
void apply_change(State& state, const Json& values, std::vector<PendingWarning>& warnings) {
  MF_CHECK(values.is_object(), InvalidArgument, "For '", kSetContextApi,
           "', expected an object of key -> value, but got ", echo(describe(values)), ".");
  bool env_config_touched = false;
  for (const auto& [key, value] : values.items()) {
    apply_entry(state, key, value, warnings);
    env_config_touched = env_config_touched || key == "env_config_path";
  }
  if (env_config_touched) {
    const std::string path = state.values["env_config_path"].get<std::string>();
    state.env_config = path.empty() ? Json() : read_env_config(path);
  }
}

}  // namespace

Json Snapshot::get(std::string_view key) const {
  if (key.starts_with(kAutoParallelPrefix) && key.size() > kAutoParallelPrefix.size() &&
      key[kAutoParallelPrefix.size()] == '.') {
    return get_auto_parallel(key.substr(kAutoParallelPrefix.size() + 1));
  }
  if (key.starts_with(kPsPrefix) && key.size() > kPsPrefix.size() && key[kPsPrefix.size()] == '.') {
    return get_ps(key.substr(kPsPrefix.size() + 1));
  }
  return detail::lookup_key(kGetContextApi, context_keys(), state_->values, key);
}

Json Snapshot::get_auto_parallel(std::string_view key) const {
  return detail::lookup_key(kGetAutoParallelApi, auto_parallel_keys(), state_->auto_parallel, key);
}

Json Snapshot::get_ps(std::string_view key) const {
  return detail::lookup_key(kGetPsApi, ps_keys(), state_->ps, key);
}

const Json& Snapshot::values() const {
  return state_->values;
}
const Json& Snapshot::auto_parallel() const {
  return state_->auto_parallel;
}
const Json& Snapshot::ps() const {
  return state_->ps;
}
const Json& Snapshot::env_config() const {
  return state_->env_config;
}
std::string Snapshot::origin(std::string_view key) const {
  const std::string name(key);
  return state_->origins.contains(name) ? state_->origins[name].get<std::string>() : "";
}
std::uint64_t Snapshot::version() const {
  return state_->version;
}

Snapshot snapshot() {
  return Snapshot(detail::current_state());
}

void set(const Json& values) {
  detail::update_state([&](State& state, std::vector<PendingWarning>& warnings) {
    apply_change(state, values, warnings);
  });
}

Json get(std::string_view key) {
  return snapshot().get(key);
}

void reset() {
  detail::update_state([](State& state, std::vector<PendingWarning>&) {
    const State defaults = detail::default_state();
    state.values = defaults.values;
    state.env_config = Json();
    state.origins = Json::object();
    for (const auto& [key, pin] : state.pinned.items()) {
      state.values[key] = pin["value"];
      state.origins[key] = pin["by"];
    }
  });
}

Json read_json_file(const std::filesystem::path& file) {
  Json document = read_json_document(file, "context file");
  MF_CHECK(
      document.is_object(), InvalidArgument, "context file '", file.string(),
      "' must hold a JSON object of key -> value (for example {\"mode\": \"GRAPH_MODE\"}), but "
      "holds ",
      document.type_name());
  // Check every key and value now, against a scratch copy, so the message can name the file.
  try {
    State scratch = *detail::current_state();
    std::vector<PendingWarning> ignored;
    apply_change(scratch, document, ignored);
  } catch (const Error& e) {
    throw Error(e.kind(), e.message() + " (in context file '" + file.string() + "')");
  }
  return document;
}

void load_file(const std::filesystem::path& file) {
  set(read_json_file(file));
}

Json parse_assignments(const std::vector<std::string>& assignments) {
  Json out = Json::object();
  for (const auto& item : assignments) {
    const std::size_t eq = item.find('=');
    MF_CHECK(eq != std::string::npos && eq > 0, InvalidArgument, "--set '", echo(item),
             "': expected key=value, for example save_graphs=2 or jit_config.jit_level=O1");
    const std::string key = item.substr(0, eq);
    const std::string_view text = std::string_view(item).substr(eq + 1);
    // Resolve which table the key belongs to, then convert the text by the key's declared type.
    std::string_view api = kSetContextApi;
    const std::vector<KeySpec>* table = &context_keys();
    std::string owner;  // "auto_parallel_context" / "ps_context" or empty
    std::string_view rest = key;
    for (const auto& [prefix, prefix_api, prefix_table] :
         {std::tuple{kAutoParallelPrefix, kSetAutoParallelApi, &auto_parallel_keys()},
          std::tuple{kPsPrefix, kSetPsApi, &ps_keys()}}) {
      if (rest.starts_with(prefix) && rest.size() > prefix.size() && rest[prefix.size()] == '.') {
        api = prefix_api;
        table = prefix_table;
        owner = prefix;
        rest = rest.substr(prefix.size() + 1);
      }
    }
    const std::size_t dot = rest.find('.');
    const std::string name(rest.substr(0, dot));
    const KeySpec* spec = find_key(*table, name);
    if (spec == nullptr) fail_unknown_key(api, *table, name);
    Json& slot = owner.empty() ? out : out[owner];
    if (dot == std::string_view::npos) {
      slot[name] = value_from_text(api, *spec, text);
      continue;
    }
    MF_CHECK(spec->type == ValueType::kDict, InvalidArgument, "--set '", echo(item), "': '", name,
             "' is a ", type_name(*spec), ", not a dict, so it has no sub-keys");
    const std::string sub_name(rest.substr(dot + 1));
    const KeySpec* sub = find_key(spec->sub_keys, sub_name);
    if (sub == nullptr) fail_unknown_key(api, spec->sub_keys, sub_name, name);
    if (!slot.contains(name) || !slot[name].is_object()) slot[name] = Json::object();
    slot[name][sub_name] = value_from_text(api, *sub, text, std::string(rest));
  }
  return out;
}

void set_from(const std::vector<std::string>& assignments) {
  set(parse_assignments(assignments));
}

}  // namespace mf::context
