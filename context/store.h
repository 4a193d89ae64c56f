#pragma once
// The process-wide store behind context::set and the parallel contexts: one immutable State
// published through a shared_mutex, replaced copy-on-write so readers never see a half-applied
// change.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "context/context.h"
#include "context/key_table.h"

namespace mf::context::detail {

struct State {
  Json values;         // set_context key -> stored value
  Json auto_parallel;  // set_auto_parallel_context key -> stored value
  Json ps;             // set_ps_context key -> stored value
  Json env_config;     // parsed env_config_path file, null when not set
  // set_context key -> the API or environment variable that set it last ("runtime.set_memory",
  // "MS_DEV_SAVE_GRAPHS"); absent: still the default.
  Json origins = Json::object();
  // set_context key -> {"by": environment variable, "value": its value}: as in MindSpore, these
  // variables win over set_context, which then warns and leaves the value alone; reset() keeps
  // them.
  Json pinned = Json::object();
  std::uint64_t version = 0;
};

// A warning to print once the change is committed (never for a change that failed).
struct PendingWarning {
  std::string once_key;
  std::string message;
};

std::shared_ptr<const State> current_state();

// Runs `change` on a copy of the current state under the writer lock and publishes the copy only if
// `change` returns; then prints the collected warnings.
void update_state(const std::function<void(State&, std::vector<PendingWarning>&)>& change);

// Validates one key = value of `table` (dotted "dict.sub" allowed) and writes it into `target`.
void apply_key(std::string_view api, const std::vector<KeySpec>& table, Json& target,
               std::string_view key, const Json& value, std::vector<PendingWarning>& warnings);

// apply_key into state.values through `api`, recording the origin; a key pinned by an environment
// variable is left alone with a warning.
void set_context_key(State& state, std::string_view api, std::string_view key, const Json& value,
                     std::vector<PendingWarning>& warnings);

// Reads key (dotted allowed) from `values` of `table`; unknown keys fail naming `api`.
Json lookup_key(std::string_view api, const std::vector<KeySpec>& table, const Json& values,
                std::string_view key);

// A State with every context at its defaults.
State default_state();

}  // namespace mf::context::detail
