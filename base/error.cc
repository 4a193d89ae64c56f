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
  full_ = message_;
  for (const auto& line : context_) full_ += "\n  " + line;
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

}  // namespace mf
