#pragma once
// One exception family for the whole engine, as in PyTorch's c10: mf::Error carries a kind, a
// message that says what was wrong and what to do, and context lines added as it travels up (pass,
// op, file).

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mf {

enum class ErrorKind {
  kInvalidArgument,  // the user gave a bad value, key, shape or file
  kNotFound,         // a named thing (key, op, file, net) does not exist
  kOutOfMemory,      // an allocation would exceed max_device_memory or the system refused it
  kUnsupported,      // valid request that this build cannot do (GPU target, enable_ps, ...)
  kDataLoss,         // a file's bytes are damaged, truncated or of a foreign format
  kUnavailable,      // another process of the job is gone or did not answer in time
  kInternal,         // a broken invariant of ours: always a bug
};

std::string_view error_kind_name(ErrorKind kind);

// What every modeflow failure throws. what() is the full text: the message, then each context line.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message);

  ErrorKind kind() const { return kind_; }
  // The message without the context lines.
  const std::string& message() const { return message_; }
  const std::vector<std::string>& context() const { return context_; }

  // Adds a line saying where the error passed through ("in pass 'cse'"); returns *this for rethrow.
  Error& add_context(std::string line);

  const char* what() const noexcept override { return full_.c_str(); }

 private:
  void rebuild();

  ErrorKind kind_;
  std::string message_;
  std::vector<std::string> context_;
  std::string full_;
};

// Text from input (a file, a key, a value, a name) as a message may quote it: control bytes and
// bytes outside printable ASCII escaped (\n, \t, \x1b, ...), so a message stays one line and a
// terminal never interprets it, and cut to max_chars of the input, then "... (N more
// characters)", so hostile input never makes a message of hundreds of KB.
std::string echo(std::string_view text, size_t max_chars = 200);

namespace detail {
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
[[noreturn]] void throw_error(ErrorKind kind, std::string message, const char* file, int line);
}  // namespace detail

}  // namespace mf

// MF_CHECK(cond, Kind, parts...): throws mf::Error of ErrorKind::k##Kind with the parts streamed
// together when cond is false. The one way to raise a user-facing error.
#define MF_CHECK(cond, kind, ...)                                                             \
  do {                                                                                        \
    if (!(cond)) [[unlikely]] {                                                               \
      ::mf::detail::throw_error(::mf::ErrorKind::k##kind, ::mf::detail::str_cat(__VA_ARGS__), \
                                __FILE__, __LINE__);                                          \
    }                                                                                         \
  } while (false)

// MF_FAIL(Kind, parts...): the same, unconditionally (for the end of a switch or a lookup miss).
#define MF_FAIL(kind, ...) MF_CHECK(false, kind, __VA_ARGS__)
