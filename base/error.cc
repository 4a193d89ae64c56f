#include "base/error.h"

namespace mf {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "InvalidArgument";
    case ErrorKind::kNotFound:
      return "NotFound";
    case ErrorKind::kOutOfMemory:
      return "OutOfMemory";
    case ErrorKind::kUnsupported:
      return "Unsupported";
    case ErrorKind::kDataLoss:
      return "DataLoss";
    case ErrorKind::kUnavailable:
      return "Unavailable";
    case ErrorKind::kInternal:
      return "Internal";
  }
  return "Unknown";
}

Error::Error(ErrorKind kind, std::string message)
    : std::runtime_error(message), kind_(kind), message_(std::move(message)) {
  rebuild();
}

Error& Error::add_context(std::string line) {
  context_.push_back(std::move(line));
  rebuild();
  return *this;
}

void Error::rebuild() {
  // An error passing through thousands of nested calls gathers a line per level: the text keeps
  // the innermost and the outermost lines and says how many were left out (context() has all).
  constexpr size_t kHead = 20, kTail = 10;
  full_ = message_;
  const size_t n = context_.size();
  for (size_t i = 0; i < n; ++i) {
    if (n > kHead + kTail + 1 && i == kHead) {
      full_ += "\n  ... (" + std::to_string(n - kHead - kTail) + " more context lines)";
      i = n - kTail - 1;
      continue;
    }
    full_ += "\n  " + context_[i];
  }
}

namespace detail {
void throw_error(ErrorKind kind, std::string message, const char* file, int line) {
  // Internal errors are our bugs: the source position helps whoever fixes it. User errors stay
  // clean.
  if (kind == ErrorKind::kInternal) {
    message += str_cat(" (internal error at ", file, ":", line, "; please report it)");
  }
  throw Error(kind, std::move(message));
}
}  // namespace detail

std::string echo(std::string_view text, size_t max_chars) {
  const std::string_view shown = text.substr(0, max_chars);
  std::string out;
  out.reserve(shown.size() + 16);
  for (const char ch : shown) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte >= 0x7f) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += ch;
    }
  }
  if (text.size() > max_chars) {
    out += "... (" + std::to_string(text.size() - max_chars) + " more characters)";
  }
  return out;
}

}  // namespace mf
