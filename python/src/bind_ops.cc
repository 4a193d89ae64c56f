// modeflow.ops: one function per op of the registry, made when the module is imported (an op added
// in runtime/ops/ appears here with no binding code). Leading tensor-like arguments are the op's
// inputs; attributes are keywords (or further positional arguments, in declaration order), checked
// against the op's attribute schema. cond and while_loop take Python functions.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <sstream>

#include "bindings.h"
#include "engine/eager/dispatch.h"
#include "engine/graph/control_flow.h"
#include "engine/ops.h"
#include "ir/op_def.h"

namespace mf::python {
namespace {

std::string shown(py::handle value) {
  return py::repr(value).cast<std::string>();
}

std::string attr_text(const ir::AttrValue& value) {
  std::ostringstream out;
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, bool>) {
          out << (v ? "True" : "False");
        } else if constexpr (std::is_same_v<V, std::string>) {
          out << "'" << v << "'";
        } else if constexpr (std::is_same_v<V, DType>) {
          out << "ms." << ir::dtype_name(v);
        } else if constexpr (std::is_same_v<V, std::vector<int64_t>> ||
                             std::is_same_v<V, std::vector<double>>) {
          out << "(";
          for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
          out << (v.size() == 1 ? ",)" : ")");
        } else {
          out << v;
        }
      },
      value);
  return out.str();
}

// "axis=-1, keep_dims=False" or "shape" for a required attribute.
std::string signature(const ir::OpDef& def) {
  std::string text;
  const int shown_inputs = def.max_inputs < 0 ? 1 : def.max_inputs;
  for (int i = 0; i < shown_inputs; ++i) {
    text += (i ? ", " : "") + std::string(def.max_inputs < 0 ? "inputs" : "x" + std::to_string(i));
  }
  for (const auto& spec : def.attrs) {
    text += (text.empty() ? "" : ", ") + spec.name;
    if (spec.default_value) text += "=" + attr_text(*spec.default_value);
  }
  return def.name + "(" + text + ")";
}

std::string docstring(const ir::OpDef& def) {
  std::string doc = signature(def) + "\n\n" + def.doc +
                    "\n\nInputs: " + std::to_string(def.min_inputs) +
                    (def.max_inputs < 0                 ? " or more"
                     : def.max_inputs == def.min_inputs ? ""
                                                        : " to " + std::to_string(def.max_inputs)) +
                    " tensor(s).";
  if (!def.attrs.empty()) doc += "\nAttributes:";
  for (const auto& spec : def.attrs) {
    doc += "\n  " + spec.name + " (" + std::string(ir::attr_kind_name(spec.kind)) +
           (spec.default_value ? ", default " + attr_text(*spec.default_value) : ", required") +
           ")" + (spec.doc.empty() ? "" : ": " + spec.doc);
  }
  return doc;
}

[[noreturn]] void attr_type_error(const ir::OpDef& def, const ir::AttrSpec& spec, py::handle value,
                                  const char* expected) {
  throw py::type_error("ops." + def.name + ": attribute '" + spec.name + "' must be " + expected +
                       ", got " + shown(value));
}

int64_t to_int(const ir::OpDef& def, const ir::AttrSpec& spec, py::handle value,
               const char* expected) {
  if (PyBool_Check(value.ptr()) || !PyIndex_Check(value.ptr()))
    attr_type_error(def, spec, value, expected);
  return py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr())).cast<int64_t>();
}

double to_float(const ir::OpDef& def, const ir::AttrSpec& spec, py::handle value,
                const char* expected) {
  if (PyBool_Check(value.ptr()) || !(PyFloat_Check(value.ptr()) || PyIndex_Check(value.ptr()) ||
                                     py::hasattr(value, "__float__")))
    attr_type_error(def, spec, value, expected);
  return py::float_(py::reinterpret_borrow<py::object>(value)).cast<double>();
}

ir::AttrValue to_attr(const ir::OpDef& def, const ir::AttrSpec& spec, py::handle value) {
  switch (spec.kind) {
    case ir::AttrKind::kBool:
      if (!PyBool_Check(value.ptr())) attr_type_error(def, spec, value, "a bool");
      return value.ptr() == Py_True;
    case ir::AttrKind::kInt:
      return to_int(def, spec, value, "an int");
    case ir::AttrKind::kFloat:
      return to_float(def, spec, value, "a float");
    case ir::AttrKind::kString:
      if (!PyUnicode_Check(value.ptr())) attr_type_error(def, spec, value, "a str");
      return value.cast<std::string>();
    case ir::AttrKind::kInts: {
      const char* expected = "an int or a sequence of ints";
      if (PyIndex_Check(value.ptr()))
        return std::vector<int64_t>{to_int(def, spec, value, expected)};
      if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr()))
        attr_type_error(def, spec, value, expected);
      std::vector<int64_t> out;
      for (py::handle item : value) out.push_back(to_int(def, spec, item, expected));
      return out;
    }
    case ir::AttrKind::kFloats: {
      const char* expected = "a float or a sequence of floats";
      if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr()))
        return std::vector<double>{to_float(def, spec, value, expected)};
      std::vector<double> out;
      for (py::handle item : value) out.push_back(to_float(def, spec, item, expected));
      return out;
    }
    case ir::AttrKind::kDType:
      return to_dtype(value);
  }
  attr_type_error(def, spec, value, "a known attribute kind");
}

py::object outputs_to_python(std::vector<Tensor> outputs) {
  if (outputs.size() == 1) return tensor_or_none(std::move(outputs[0]));
  py::tuple tuple(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) tuple[i] = tensor_or_none(std::move(outputs[i]));
  return tuple;
}

py::object call_registered(const ir::OpDef& def, const py::args& args, const py::kwargs& kwargs) {
  std::vector<Tensor> inputs;
  ir::Attrs attrs;
  size_t next = 0;
  const bool variadic = def.max_inputs < 0;
  // concat((a, b), axis=0): a variadic op's inputs as one sequence, as MindSpore writes it.
  if (variadic && args.size() > 0 &&
      (PyList_Check(args[0].ptr()) || PyTuple_Check(args[0].ptr())) && py::len(args[0]) > 0 &&
      py::isinstance<Tensor>(args[0][py::int_(0)])) {
    for (py::handle item : args[0]) inputs.push_back(to_tensor(item));
    next = 1;
  } else {
    std::optional<DType> like;  // a number among the inputs takes the first tensor's dtype
    for (py::handle arg : args) {
      if (py::isinstance<Tensor>(arg)) {
        like = arg.cast<const Tensor&>().dtype();
        break;
      }
    }
    const size_t max_inputs = variadic ? args.size() : size_t(def.max_inputs);
    while (next < args.size() && next < max_inputs) {
      py::handle arg = args[next];
      const bool required_input = next < size_t(def.min_inputs);
      const bool tensor = py::isinstance<Tensor>(arg) || py::isinstance<py::array>(arg);
      if (!(tensor || (required_input && is_tensor_like(arg)))) break;
      inputs.push_back(to_tensor(arg, like));
      ++next;
    }
  }
  for (size_t k = 0; next < args.size(); ++k, ++next) {
    if (k >= def.attrs.size()) {
      throw py::type_error("ops." + def.name + "() takes " + std::to_string(next - k) +
                           " input(s) and " + std::to_string(def.attrs.size()) +
                           " attribute(s) but " + std::to_string(args.size()) +
                           " positional arguments were given: " + signature(def));
    }
    attrs[def.attrs[k].name] = to_attr(def, def.attrs[k], args[next]);
  }
  for (auto [key, value] : kwargs) {
    const std::string name = key.cast<std::string>();
    const auto spec = std::find_if(def.attrs.begin(), def.attrs.end(),
                                   [&](const ir::AttrSpec& s) { return s.name == name; });
    if (spec == def.attrs.end()) {
      throw py::type_error("ops." + def.name + "() got an unexpected keyword argument '" + name +
                           "': " + signature(def));
    }
    if (attrs.count(name) != 0) {
      throw py::type_error("ops." + def.name + "() got multiple values for attribute '" + name +
                           "'");
    }
    attrs[name] = to_attr(def, *spec, value);
  }
  return outputs_to_python(run_op(def.name, std::move(inputs), std::move(attrs)));
}

Tensor returned_tensor(py::handle value, const char* what) {
  if (!py::isinstance<Tensor>(value)) {
    throw py::type_error(std::string(what) + " must return a Tensor, got " +
                         py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  }
  return value.cast<Tensor>();
}

std::vector<Tensor> tensors_of(py::handle value, const char* what) {
  std::vector<Tensor> out;
  if (py::isinstance<Tensor>(value)) return {value.cast<Tensor>()};
  if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
    throw py::type_error(std::string(what) + " must be a Tensor or a tuple of Tensors, got " +
                         py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  }
  for (py::handle item : value) out.push_back(returned_tensor(item, what));
  return out;
}

}  // namespace

std::vector<Tensor> run_op(std::string_view op, std::vector<Tensor> inputs, ir::Attrs attrs) {
  const std::source_location where = python_call_site();
  std::vector<Tensor> outputs;
  {
    py::gil_scoped_release release;
    outputs = engine::call_op(op, inputs, std::move(attrs), where);
  }
  flush_warnings();
  return outputs;
}

void bind_ops(py::module_& m) {
  py::module_ ops = m.def_submodule("ops", "Every registered op, generated from the op registry.");
  py::list names;
  for (const ir::OpDef* def : ir::all_ops()) {
    // call/cond/while need subgraphs and fused kernels come from fusion: not user calls.
    if (def->has(ir::Trait::kControlFlow) || def->has(ir::Trait::kFused)) continue;
    py::cpp_function function(
        [def](py::args args, py::kwargs kwargs) { return call_registered(*def, args, kwargs); },
        py::name(def->name.c_str()), py::doc(docstring(*def).c_str()));
    ops.attr(def->name.c_str()) = function;
    names.append(def->name);
  }
  ops.attr("registered") = names;

  ops.def(
      "cond",
      [](py::object pred, py::function then_fn, py::function else_fn) {
        auto branch = [](py::function fn) {
          return [fn]() { return returned_tensor(fn(), "a cond branch"); };
        };
        return tensor_or_none(mf::ops::cond(to_tensor(pred), branch(then_fn), branch(else_fn)));
      },
      py::arg("pred"), py::arg("then_fn"), py::arg("else_fn"),
      "then_fn() if pred else else_fn(); in GRAPH mode both branches compile and the choice is "
      "made when the graph runs.");
  ops.def(
      "while_loop",
      [](py::function cond_fn, py::function body_fn, py::object init) {
        const bool single = py::isinstance<Tensor>(init);
        auto pack = [single](const std::vector<Tensor>& vars) -> py::object {
          if (single) return py::cast(vars[0]);
          return py::tuple(py::cast(vars));
        };
        std::vector<Tensor> result = mf::ops::while_loop(
            [&](const std::vector<Tensor>& vars) {
              return returned_tensor(cond_fn(pack(vars)), "while_loop's cond_fn");
            },
            [&](const std::vector<Tensor>& vars) {
              return tensors_of(body_fn(pack(vars)), "while_loop's body_fn");
            },
            tensors_of(init, "while_loop's init"));
        return pack(result);
      },
      py::arg("cond_fn"), py::arg("body_fn"), py::arg("init"),
      "vars = init; while cond_fn(vars): vars = body_fn(vars). In GRAPH mode the loop compiles.");
  ops.def(
      "sync",
      [] {
        {
          py::gil_scoped_release release;
          engine::sync();
        }
        flush_warnings();
      },
      "Waits for every queued op; raises a pending asynchronous error.");
}

}  // namespace mf::python
