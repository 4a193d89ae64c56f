#include "context/json_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"

namespace mf::context {

nlohmann::json read_json_document(const std::filesystem::path& file, std::string_view what) {
  std::error_code ec;
  MF_CHECK(!std::filesystem::is_directory(file, ec), InvalidArgument, "cannot read ", what, " '",
           file.string(), "': it is a directory, not a JSON file");
  std::ifstream in(file, std::ios::binary);
  MF_CHECK(in.good(), NotFound, "cannot read ", what, " '", file.string(),
           "': ", std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
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
  }
}

}  // namespace mf::context
