#pragma once
// What the binding files share. Each bind_*.cc adds one area to the module; support.cc holds the
// machinery they all use (errors, warnings, Python call sites, JSON and tensor conversion). The
// heavy pybind11 templates stay in these few translation units.

#include <pybind11/pybind11.h>

#include <optional>
#include <source_location>

#include "context/context.h"
#include "engine/tensor.h"
#include "ir/attribute.h"

namespace mf::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_context(py::module_& m);
void bind_tensor(py::module_& m);
void bind_ops(py::module_& m);
void bind_nn(py::module_& m);
void bind_profiler(py::module_& m);
void bind_autodiff(py::module_& m);
void bind_checkpoint(py::module_& m);
void bind_dataset(py::module_& m);
void bind_train(py::module_& m);
void bind_comm(py::module_& m);

// Engine warnings (spdlog, level warn) are held, then raised through Python's `warnings` by
// flush_warnings() at the end of a call into the engine, on the calling thread. Throws
// py::error_already_set when a warning filter turns one into an error.
void install_warning_sink();
void flush_warnings();

// The innermost Python frame as a std::source_location ("net.py:12 in 'construct'"), so that an
// asynchronous PYNATIVE error names the Python line that queued the op. Needs the GIL.
std::source_location python_call_site();
// "net.py:12 in 'construct'" for messages; "<unknown>" outside any Python frame.
std::string python_line();

// Raises modeflow.TracedValueError: `what` (bool(), asnumpy(), ...) needs the value of a tensor
// that only exists while the compiled graph runs.
[[noreturn]] void throw_traced_value_error(const char* what);
// The same error with its own advice in place of the one about Python control flow.
[[noreturn]] void throw_traced_value_error(const char* what, const char* advice);
// True for a tensor of a trace (no buffer and no task to fill one: a value of a graph).
bool is_traced(const Tensor& tensor);

context::Json to_json(py::handle value);
py::object from_json(const context::Json& value);

// A Tensor from a Tensor, numpy array, Python scalar or (nested) list. Scalars take `scalar_dtype`
// when given (x * 1.5 keeps x's dtype); otherwise MindSpore's defaults: float -> float32,
// int -> int64, bool -> bool. numpy arrays keep their dtype.
Tensor to_tensor(py::handle value, std::optional<DType> scalar_dtype = std::nullopt);
bool is_tensor_like(py::handle value);
// The Python dtype object (modeflow.float32, ...) of a dtype, and back (also numpy dtypes and
// names such as "float32").
DType to_dtype(py::handle value);

}  // namespace mf::python

namespace mf::python {

// MindSpore's Parameter: a tensor that a cell registers as a weight when assigned to an attribute
// (`self.w = ms.Parameter(...)`), so it is bound by name in compiled graphs and dumps.
struct Parameter : Tensor {
  Parameter(Tensor value, std::string parameter_name, bool grad)
      : Tensor(std::move(value)), name(std::move(parameter_name)), requires_grad(grad) {
    if (defined()) impl()->is_parameter = true;
  }
  std::string name;
  bool requires_grad = true;
};

// Runs a registered op through the dispatcher with the caller's Python line as its call site,
// the GIL released while the engine works (a synchronous kernel, a full PYNATIVE queue).
std::vector<Tensor> run_op(std::string_view op, std::vector<Tensor> inputs, ir::Attrs attrs = {});

// None for an undefined tensor (what a jit-compiled part returns under precompile_only).
py::object tensor_or_none(Tensor tensor);

}  // namespace mf::python
