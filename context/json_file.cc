#include "context/json_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "base/file_reader.h"

namespace mf::context {

void check_json_depth(std::string_view text, std::string_view what, std::string_view source) {
  // Counted before parsing: nlohmann builds, copies, dumps and destroys values recursively, so a
  // document nested 100,000 deep would exhaust the stack after a successful parse.
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      MF_CHECK(++depth <= kMaxJsonDepth, InvalidArgument, what, source.empty() ? "" : " '", source,
               source.empty() ? "" : "'", " nests arrays and objects more than ", kMaxJsonDepth,
               " deep (at byte ", i, "); flatten it");
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

nlohmann::json read_json_document(const std::filesystem::path& file, std::string_view what) {
  const std::string text = read_regular_file(file, kMaxTextFileBytes, what);
  check_json_depth(text, what, file.string());
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // nlohmann reports a byte offset; a user looks for a line and a column.
    std::size_t line = 1;
    std::size_t column = 1;
    const std::size_t end = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    for (std::size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string reason = e.what();
    // Keep only nlohmann's explanation after "parse error at ...: ".
    if (const auto colon = reason.find(": ", reason.find("parse error"));
        colon != std::string::npos) {
      reason = reason.substr(colon + 2);
    }
    MF_FAIL(InvalidArgument, what, " '", file.string(), "' is not valid JSON at line ", line,
            ", column ", column, ": ", reason);
  } catch (const nlohmann::json::exception& e) {
    // Valid syntax the parser still refuses: a number beyond a double ("1e999", out_of_range 406;
    // found by context_json_fuzz). No position is given; the reason names the number.
    std::string reason = e.what();
    if (const auto bracket = reason.find("] "); bracket != std::string::npos) {
      reason = reason.substr(bracket + 2);
    }
    MF_FAIL(InvalidArgument, what, " '", file.string(), "' cannot be read: ", echo(reason, 120),
            "; write numbers that fit a double");
  }
}

}  // namespace mf::context
