#pragma once
// The process-wide context, modelled on mindspore.set_context / get_context. Only this layer knows
// keys by name; everything below the engine receives typed options built from context::Policy.
//
// CONTRACT (names used by tools/ and tests/install):
//   using Json = nlohmann::json;
//   void set(const Json& values);                  // object key -> value; all-or-nothing
//   Json get(std::string_view key);                // "jit_config" or dotted "jit_config.jit_level"
//   void reset();
//   Json read_json_file(const std::filesystem::path& file);      // parse + basic shape check, no
//   set void load_file(const std::filesystem::path& file);           // set(read_json_file(file))
//   Json parse_assignments(const std::vector<std::string>& a);   // {"k=v", "d.k=v"} -> object
//   (typed)
//
// Besides the keys of set_context, set() and files accept "auto_parallel_context" and "ps_context"
// objects (and dotted "auto_parallel_context.device_num"), applied in the same all-or-nothing
// change.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mf::context {

using Json = nlohmann::json;

namespace detail {
struct State;
}

// An immutable copy of every context (set_context, auto-parallel, ps) at one moment.
// Cheap to copy; engine components take one and hold it while they work, unaffected by later sets.
class Snapshot {
 public:
  // Same lookups as context::get / get_auto_parallel_context / get_ps_context, on this copy.
  Json get(std::string_view key) const;
  Json get_auto_parallel(std::string_view key) const;
  Json get_ps(std::string_view key) const;

  // Every set_context key (without deprecated aliases) -> its stored value.
  const Json& values() const;
  const Json& auto_parallel() const;
  const Json& ps() const;
  // The parsed env_config_path file (rdr, sys.mem_Reuse), or null when env_config_path is empty.
  const Json& env_config() const;
  // The API or environment variable that set a set_context key last ("context.set_context",
  // "runtime.set_memory", "MS_DEV_SAVE_GRAPHS"); empty while the key holds its default.
  std::string origin(std::string_view key) const;
  // Increases with every successful change; equal versions mean equal contents.
  std::uint64_t version() const;

  explicit Snapshot(std::shared_ptr<const detail::State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<const detail::State> state_;
};

// Sets keys (object of key -> value, dotted keys allowed). Validates every value into a copy first
// and publishes it only when all are valid: on any error nothing changes. Throws mf::Error.
void set(const Json& values);
// The stored value: mode and save_graphs as ints, sizes as "xxGB" strings, dicts as objects.
Json get(std::string_view key);
// Restores every set_context key to its default (the auto-parallel and ps contexts have their own
// reset).
void reset();
// The current state, for components that read several values consistently.
Snapshot snapshot();

// Reads a JSON context file with the same names and values as set(); checks every key and value
// (messages name the file) but changes nothing.
Json read_json_file(const std::filesystem::path& file);
void load_file(const std::filesystem::path& file);
// {"save_graphs=2", "jit_config.jit_level=O1"} -> {"save_graphs": 2, "jit_config": {"jit_level":
// "O1"}}, each text converted to its key's declared type. Throws InvalidArgument for "expected
// key=value".
Json parse_assignments(const std::vector<std::string>& assignments);
// set(parse_assignments(assignments)): the --set form from code.
void set_from(const std::vector<std::string>& assignments);

}  // namespace mf::context
