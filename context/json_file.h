#pragma once
// Reading a JSON document from a file with errors a user can act on: which file, which line and
// column.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string_view>

namespace mf::context {

// Parses the file. `what` names it in messages ("context file", "env_config_path file"). A missing
// or unreadable file throws NotFound; malformed JSON throws InvalidArgument with line and column.
nlohmann::json read_json_document(const std::filesystem::path& file, std::string_view what);

}  // namespace mf::context
