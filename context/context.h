#pragma once
// The process-wide context, modelled on mindspore.set_context / get_context. Only this layer knows keys
// by name; everything below the engine receives typed options built from context::Policy.
//
// CONTRACT (filled in by the context subsystem work; names here are used by tools/ and tests/install):
//   using Json = nlohmann::json;
//   void set(const Json& values);                  // object key -> value; all-or-nothing
//   Json get(std::string_view key);                // "jit_config" or dotted "jit_config.jit_level"
//   void reset();
//   Json read_json_file(const std::filesystem::path& file);      // parse + basic shape check, no set
//   void load_file(const std::filesystem::path& file);           // set(read_json_file(file))
//   Json parse_assignments(const std::vector<std::string>& a);   // {"k=v", "d.k=v"} -> object (typed)

#include <nlohmann/json.hpp>
