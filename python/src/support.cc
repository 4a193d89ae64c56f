// The machinery every binding uses: engine errors as Python exceptions, engine warnings through
// Python's `warnings`, Python call sites for the engine's error messages, and JSON conversion.
#include <spdlog/sinks/base_sink.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/logging.h"
#include "bindings.h"
#include "context/json_file.h"
#include "engine/graph/trace.h"

namespace mf::python {
namespace {

PyObject* traced_value_error = nullptr;  // modeflow.TracedValueError, created by bind_errors

// MindSpore's exception for each kind: a bad key, value or shape is a ValueError (TypeError is
// decided by the caller, which knows the expected type), a lack of memory a MemoryError, the rest
// RuntimeError. The text is the engine's own, unchanged.
PyObject* exception_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kNotFound:
      return PyExc_ValueError;
    case ErrorKind::kOutOfMemory:
      return PyExc_MemoryError;
    case ErrorKind::kUnsupported:
    case ErrorKind::kDataLoss:
    case ErrorKind::kUnavailable:
    case ErrorKind::kInternal:
      return PyExc_RuntimeError;
  }
  return PyExc_RuntimeError;
}

// Warnings wait here until the thread that made the engine call raises them in Python: the sink
// may run on the PYNATIVE worker, and a warning filter may turn a warning into an exception, which
// must not unwind through engine code.
std::mutex pending_mutex;
std::deque<std::string> pending_warnings;
std::atomic<bool> has_pending{false};

class WarningSink : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit WarningSink(std::vector<spdlog::sink_ptr> others) : others_(std::move(others)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    if (message.level == spdlog::level::warn) {
      std::lock_guard lock(pending_mutex);
      pending_warnings.emplace_back(message.payload.begin(), message.payload.end());
      has_pending.store(true, std::memory_order_release);
      return;
    }
    for (auto& sink : others_) {
      if (sink->should_log(message.level)) sink->log(message);
    }
  }
  void flush_() override {
    for (auto& sink : others_) sink->flush();
  }

 private:
  std::vector<spdlog::sink_ptr> others_;  // the engine's stderr sink: every other level
};

// libstdc++'s std::source_location is one pointer to this record (bits/c++config, GCC 11+). The
// engine keeps locations, not text, for every queued op; a Python location is interned once per
// (code object, line) and lives for the process, so a pointer to it stays valid.
struct LocationRecord {
  const char* file;
  const char* function;
  unsigned line;
  unsigned column;
};
struct InternedLocation {
  std::string file, function;
  LocationRecord record;
};

}  // namespace

void bind_errors(py::module_& m) {
  traced_value_error = PyErr_NewExceptionWithDoc(
      "modeflow.TracedValueError",
      "Python code asked for the value of a tensor while GRAPH mode (or jit) traces it: the value "
      "exists only when the compiled graph runs. Use ms.ops.cond / ms.ops.while_loop.",
      PyExc_RuntimeError, nullptr);
  m.attr("TracedValueError") = py::handle(traced_value_error);
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const Error& error) {
      PyErr_SetString(exception_for(error.kind()), error.what());
    }
  });
}

void install_warning_sink() {
  spdlog::logger& logger = log::logger();
  auto sink = std::make_shared<WarningSink>(logger.sinks());
  logger.sinks().clear();
  logger.sinks().push_back(std::move(sink));
}

void flush_warnings() {
  if (!has_pending.load(std::memory_order_acquire)) return;
  std::deque<std::string> messages;
  {
    std::lock_guard lock(pending_mutex);
    messages.swap(pending_warnings);
    has_pending.store(false, std::memory_order_release);
  }
  for (const std::string& message : messages) {
    // stacklevel 1: the Python line that called into the engine.
    if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0) throw py::error_already_set();
  }
}

std::source_location python_call_site() {
#if defined(__GLIBCXX__)
  static_assert(sizeof(std::source_location) == sizeof(const LocationRecord*),
                "libstdc++'s source_location layout changed; update python_call_site()");
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame == nullptr) return {};
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference, kept by the cache below
  // Keyed by the code object, which the cache keeps alive (its address is never reused), and the
  // instruction: the line is computed once per call site, not per op (it scans the line table).
#if PY_VERSION_HEX >= 0x030B0000
  const int where = PyFrame_GetLasti(frame);
#else
  const int where = PyFrame_GetLineNumber(frame);
#endif
  static std::mutex mutex;
  static std::map<std::pair<PyCodeObject*, int>, std::unique_ptr<InternedLocation>> cache;
  std::lock_guard lock(mutex);
  auto [it, inserted] = cache.try_emplace({code, where});
  if (inserted) {
    const int line = PyFrame_GetLineNumber(frame);
    auto interned = std::make_unique<InternedLocation>();
    interned->file = PyUnicode_AsUTF8(code->co_filename);
    interned->function = PyUnicode_AsUTF8(code->co_name);
    interned->record = {interned->file.c_str(), interned->function.c_str(), unsigned(line), 0};
    it->second = std::move(interned);
  } else {
    Py_DECREF(code);
  }
  std::source_location location;
  const LocationRecord* record = &it->second->record;
  std::memcpy(static_cast<void*>(&location), &record, sizeof record);
  return location;
#else
  return {};  // another standard library: errors name the op and scope, not the Python line
#endif
}

std::string python_line() {
  PyFrameObject* frame = PyEval_GetFrame();
  if (frame == nullptr) return "<unknown>";
  PyCodeObject* code = PyFrame_GetCode(frame);
  std::string out = std::string(PyUnicode_AsUTF8(code->co_filename)) + ":" +
                    std::to_string(PyFrame_GetLineNumber(frame)) + " in '" +
                    PyUnicode_AsUTF8(code->co_name) + "'";
  Py_DECREF(code);
  return out;
}

bool is_traced(const Tensor& tensor) {
  // A pending result of a queued jit run has no buffer yet either, but a task that will fill it.
  return tensor.defined() && tensor.impl()->buffer == nullptr && tensor.impl()->ready_seq == 0;
}

void throw_traced_value_error(const char* what) {
  throw_traced_value_error(
      what,
      "Python `if`, `while`, bool(), float() and asnumpy() cannot see it. Write data-dependent "
      "branches with ms.ops.cond(pred, then_fn, else_fn) and loops with ms.ops.while_loop(cond_fn, "
      "body_fn, init), or run this code in PYNATIVE_MODE.");
}

void throw_traced_value_error(const char* what, const char* advice) {
  const std::string message = python_line() + ": " + what +
                              " needs the value of a tensor that is being traced (GRAPH mode or "
                              "jit): the value exists only when the compiled graph runs, so " +
                              advice;
  PyErr_SetString(traced_value_error, message.c_str());
  throw py::error_already_set();
}

namespace {

context::Json to_json_at(py::handle value, size_t depth);

// A dict or list nested deeper than a JSON file may be (which also stops one that contains itself)
// is a ValueError, as the JSON reader refuses such a file, before the recursion runs out of stack.
void check_nesting(size_t depth) {
  if (depth > context::kMaxJsonDepth) {
    throw py::value_error("a value nests dicts and lists more than " +
                          std::to_string(context::kMaxJsonDepth) +
                          " deep (or contains itself); context values are plain data");
  }
}

}  // namespace

context::Json to_json(py::handle value) {
  return to_json_at(value, 0);
}

namespace {

context::Json to_json_at(py::handle value, size_t depth) {
  if (value.is_none()) return nullptr;
  if (PyBool_Check(value.ptr())) return value.ptr() == Py_True;
  if (PyLong_Check(value.ptr())) {
    int overflow = 0;
    const long long number = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow != 0) {
      throw py::value_error("the integer " + py::str(value).cast<std::string>() +
                            " does not fit in 64 bits");
    }
    return int64_t(number);
  }
  if (PyFloat_Check(value.ptr())) return PyFloat_AsDouble(value.ptr());
  if (PyUnicode_Check(value.ptr())) return value.cast<std::string>();
  if (PyDict_Check(value.ptr())) {
    check_nesting(depth + 1);
    context::Json object = context::Json::object();
    for (auto [key, item] : value.cast<py::dict>()) {
      if (!PyUnicode_Check(key.ptr())) {
        throw py::type_error("dict keys must be str, got " +
                             py::str(py::type::of(key).attr("__name__")).cast<std::string>());
      }
      object[key.cast<std::string>()] = to_json_at(item, depth + 1);
    }
    return object;
  }
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    check_nesting(depth + 1);
    context::Json array = context::Json::array();
    for (py::handle item : value) array.push_back(to_json_at(item, depth + 1));
    return array;
  }
  // numpy scalars and other numbers.
  if (PyIndex_Check(value.ptr())) {
    PyObject* index = PyNumber_Index(value.ptr());
    if (index == nullptr) throw py::error_already_set();
    return to_json_at(py::reinterpret_steal<py::object>(index), depth);
  }
  if (py::hasattr(value, "__float__") && !py::hasattr(value, "__len__"))
    return py::float_(value.cast<py::object>()).cast<double>();
  throw py::type_error("cannot use a value of type " +
                       py::str(py::type::of(value).attr("__name__")).cast<std::string>() +
                       " here; use None, bool, int, float, str, list, tuple or dict");
}

}  // namespace

py::object from_json(const context::Json& value) {
  switch (value.type()) {
    case context::Json::value_t::null:
      return py::none();
    case context::Json::value_t::boolean:
      return py::bool_(value.get<bool>());
    case context::Json::value_t::number_integer:
      return py::int_(value.get<int64_t>());
    case context::Json::value_t::number_unsigned:
      return py::int_(value.get<uint64_t>());
    case context::Json::value_t::number_float:
      return py::float_(value.get<double>());
    case context::Json::value_t::string:
      return py::str(value.get_ref<const std::string&>());
    case context::Json::value_t::array: {
      py::list list;
      for (const auto& item : value) list.append(from_json(item));
      return list;
    }
    case context::Json::value_t::object: {
      py::dict dict;
      for (const auto& [key, item] : value.items()) dict[py::str(key)] = from_json(item);
      return dict;
    }
    default:
      return py::none();
  }
}

}  // namespace mf::python
