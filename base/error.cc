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

std::string cut_for_message(std::string_view text, size_t max_chars) {
  if (text.size() <= max_chars) return std::string(text);
  return std::string(text.substr(0, max_chars)) + "... (" +
         std::to_string(text.size() - max_chars) + " more characters)";
}

}  // namespace mf
