#pragma once
// Reading a JSON document from a file with errors a user can act on: which file, which line and
// column.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string_view>

namespace mf::context {

// Parses the file. `what` names it in messages ("context file", "env_config_path file"). A missing
// or unreadable file throws NotFound; malformed JSON throws InvalidArgument with line and column.
// The file is read with read_regular_file (a FIFO, a device or a file over 256 MiB is an
// InvalidArgument, never a hang) and its nesting is bounded by kMaxJsonDepth.
nlohmann::json read_json_document(const std::filesystem::path& file, std::string_view what);

// How deep arrays and objects may nest in any JSON the engine reads (files and command-line
// values).
inline constexpr size_t kMaxJsonDepth = 128;

// InvalidArgument "<what> '<source>' nests arrays and objects more than 128 deep (at byte N)"
// when `text` nests deeper than kMaxJsonDepth; strings are skipped.
void check_json_depth(std::string_view text, std::string_view what, std::string_view source = {});

}  // namespace mf::context
