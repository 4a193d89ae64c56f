// modeflow.Tensor over mf::Tensor: made from numpy arrays, Python scalars and lists (numpy dtypes
// kept), read back with asnumpy() (a read-only view of the engine's buffer that keeps the buffer
// alive, so it can never dangle) or the buffer protocol, and the arithmetic operators through the
// registered ops.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <bit>
#include <cstdint>
#include <limits>

#include "bindings.h"
#include "engine/graph/trace.h"
#include "engine/ops.h"

namespace mf::python {
namespace {

std::optional<DType> dtype_of_numpy(const py::dtype& type) {
  const char kind = type.kind();
  const auto size = type.itemsize();
  if (kind == 'f' && size == 4) return DType::kFloat32;
  if (kind == 'f' && size == 8) return DType::kFloat64;
  if (kind == 'i' && size == 4) return DType::kInt32;
  if (kind == 'i' && size == 8) return DType::kInt64;
  if (kind == 'b' && size == 1) return DType::kBool;
  return std::nullopt;
}

py::dtype numpy_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return py::dtype::of<float>();
    case DType::kFloat64:
      return py::dtype::of<double>();
    case DType::kInt32:
      return py::dtype::of<int32_t>();
    case DType::kInt64:
      return py::dtype::of<int64_t>();
    case DType::kBool:
      return py::dtype::of<bool>();
  }
  throw py::type_error("unknown dtype");
}

std::string buffer_format(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return py::format_descriptor<float>::format();
    case DType::kFloat64:
      return py::format_descriptor<double>::format();
    case DType::kInt32:
      return py::format_descriptor<int32_t>::format();
    case DType::kInt64:
      return py::format_descriptor<int64_t>::format();
    case DType::kBool:
      return py::format_descriptor<bool>::format();
  }
  throw py::type_error("unknown dtype");
}

std::string type_name(py::handle value) {
  return py::str(py::type::of(value).attr("__name__"));
}

Tensor from_array(py::array array) {
  // A byte order other than the machine's ('>f4' here) is converted, never read as native bytes.
  const std::string byteorder = py::str(array.dtype().attr("byteorder"));
  if (byteorder == (std::endian::native == std::endian::little ? ">" : "<")) {
    array = array.attr("astype")(array.dtype().attr("newbyteorder")("="));
  }
  const auto dtype = dtype_of_numpy(array.dtype());
  if (!dtype) {
    throw py::type_error("numpy dtype " + py::str(array.dtype()).cast<std::string>() +
                         " is not supported: modeflow tensors are float32, float64, int32, int64 "
                         "or bool; convert with .astype(np.float32) (or another of those)");
  }
  // numpy's own call, not py::array::ensure: ensure swallows numpy's MemoryError (a zero-stride
  // view of 2^30 elements needs a 4 GiB copy) and hands back a null array.
  const py::array contiguous =
      array.flags() & py::array::c_style
          ? array
          : py::array(py::module_::import("numpy").attr("ascontiguousarray")(array));
  Shape shape(contiguous.shape(), contiguous.shape() + contiguous.ndim());
  return Tensor::from_bytes(*dtype, shape, contiguous.data());
}

// Waits for the tensor (GIL released), refusing tensors that are being traced.
const Tensor& ready(const Tensor& tensor, const char* what) {
  if (!tensor.defined()) {
    throw py::value_error(std::string(what) +
                          ": the tensor is undefined (a jit-compiled part returns none under "
                          "precompile_only)");
  }
  if (is_traced(tensor) || engine::Tracer::binds_to_parameter(tensor)) {
    throw_traced_value_error(what);
  }
  {
    py::gil_scoped_release release;
    tensor.sync();
  }
  flush_warnings();
  return tensor;
}

py::array as_numpy(const Tensor& tensor) {
  ready(tensor, "asnumpy()");
  // The capsule owns a reference to the buffer: the array outlives the Tensor safely.
  auto* owner = new std::shared_ptr<TensorImpl>(tensor.impl());
  py::capsule base(owner, [](void* p) { delete static_cast<std::shared_ptr<TensorImpl>*>(p); });
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  py::array array(numpy_dtype(tensor.dtype()), shape, tensor.raw_data(), base);
  // Read-only: the engine may share this buffer with graph constants, weights or other tensors.
  py::detail::array_proxy(array.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return array;
}

// One element as a Python number.
py::object item(const Tensor& tensor, const char* what) {
  ready(tensor, what);
  if (tensor.numel() != 1) {
    throw py::value_error(std::string(what) + " needs a tensor of one element, got shape " +
                          ir::shape_to_string(tensor.shape()));
  }
  const double value = tensor.to_doubles()[0];
  switch (tensor.dtype()) {
    case DType::kBool:
      return py::bool_(value != 0);
    case DType::kInt32:
    case DType::kInt64:
      return py::int_(int64_t(value));
    default:
      return py::float_(value);
  }
}

std::string repr(const Tensor& tensor) {
  if (!tensor.defined()) return "Tensor(undefined)";
  std::string head = "Tensor(shape=" + ir::shape_to_string(tensor.shape()) +
                     ", dtype=" + std::string(ir::dtype_name(tensor.dtype()));
  if (is_traced(tensor)) return head + ", traced)";
  py::object values = as_numpy(tensor);
  return head + ", value=\n" + py::repr(values).cast<std::string>() + ")";
}

std::vector<int64_t> dims_from(py::args args) {
  // reshape(2, 3) and reshape((2, 3)) alike.
  if (args.size() == 1 && py::isinstance<py::sequence>(args[0]))
    return args[0].cast<std::vector<int64_t>>();
  return args.cast<std::vector<int64_t>>();
}

// numpy's scalar base class (np.float32(1.5), np.int64(3)), looked up once.
py::handle numpy_generic() {
  static py::handle generic = py::object(py::module_::import("numpy").attr("generic")).release();
  return generic;
}

// ---- dtype promotion of the operators (MindSpore 2.x, as PyTorch) ----
// Tensor with tensor (numpy arrays and lists are tensors): bool < int32 < int64 < float32 <
// float64, the higher wins, so any float beats any int. A Python number (or numpy scalar) adapts
// to the tensor: a bool keeps its dtype; an int keeps it, except that a bool tensor becomes int64;
// a float keeps a float dtype and makes an int or bool tensor float32. Then per operator: `/` of
// integers or bools is true division in float32; `**` of integers runs in float64 and is cast back
// (exact while |result| < 2^53); + and * of two bools run in int32 and are cast back to bool
// (numpy's logical or / and); `<` and `>` compare bools as int32. Every conversion is a `cast`
// op, so GRAPH mode traces it.

int promotion_rank(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return 0;
    case DType::kInt32:
      return 1;
    case DType::kInt64:
      return 2;
    case DType::kFloat32:
      return 3;
    case DType::kFloat64:
      return 4;
  }
  return 0;
}

enum class ScalarKind { kNone, kBool, kInt, kFloat };

ScalarKind scalar_kind(py::handle value) {
  if (PyBool_Check(value.ptr())) return ScalarKind::kBool;
  if (PyLong_Check(value.ptr())) return ScalarKind::kInt;
  if (PyFloat_Check(value.ptr())) return ScalarKind::kFloat;
  if (py::isinstance(value, numpy_generic())) {
    const char kind = py::array(py::module_::import("numpy").attr("asarray")(value)).dtype().kind();
    if (kind == 'b') return ScalarKind::kBool;
    if (kind == 'i' || kind == 'u') return ScalarKind::kInt;
    if (kind == 'f') return ScalarKind::kFloat;
  }
  return ScalarKind::kNone;
}

DType with_scalar(DType tensor, ScalarKind kind) {
  switch (kind) {
    case ScalarKind::kInt:
      return tensor == DType::kBool ? DType::kInt64 : tensor;
    case ScalarKind::kFloat:
      return ir::is_floating(tensor) ? tensor : DType::kFloat32;
    case ScalarKind::kBool:
    case ScalarKind::kNone:
      break;
  }
  return tensor;
}

// A Python or numpy integer, exactly (not through a double, which rounds above 2^53); OverflowError
// (as numpy 2) when it does not fit `dtype`, int32 or int64.
int64_t exact_integer(py::handle value, DType dtype) {
  const py::int_ as_int(py::reinterpret_borrow<py::object>(value));
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
  const bool fits =
      overflow == 0 && (dtype != DType::kInt32 || (v >= std::numeric_limits<int32_t>::min() &&
                                                   v <= std::numeric_limits<int32_t>::max()));
  if (!fits) {
    const std::string message =
        "Python integer " + py::str(static_cast<py::handle>(as_int)).cast<std::string>() +
        " out of bounds for " + (dtype == DType::kInt32 ? "int32" : "int64") +
        (dtype == DType::kInt32 ? "; cast the tensor first, e.g. x.astype(ms.int64)"
                                : "; use a float, or keep the value within int64");
    PyErr_SetString(PyExc_OverflowError, message.c_str());
    throw py::error_already_set();
  }
  return v;
}

// A 0-d tensor of `dtype` holding the Python number `value`: integers into integer dtypes exactly
// and range-checked, anything else through double (as numpy rounds it).
Tensor scalar_tensor(py::handle value, DType dtype) {
  const bool integer = PyLong_Check(value.ptr()) || scalar_kind(value) == ScalarKind::kInt;
  if (integer && !PyBool_Check(value.ptr())) {
    if (dtype == DType::kInt32) {
      return Tensor::from_vector(
          std::vector<int32_t>{static_cast<int32_t>(exact_integer(value, dtype))}, {});
    }
    if (dtype == DType::kInt64) {
      return Tensor::from_vector(std::vector<int64_t>{exact_integer(value, dtype)}, {});
    }
  }
  return Tensor::full({}, py::reinterpret_borrow<py::object>(value).cast<double>(), dtype);
}

Tensor cast_to(const Tensor& tensor, DType dtype) {
  if (tensor.dtype() == dtype) return tensor;
  return run_op("cast", {tensor}, {{"dtype", dtype}})[0];
}

py::object binary(const char* symbol, const char* op, const Tensor& self, py::handle other,
                  bool reverse) {
  if (!is_tensor_like(other)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  const ScalarKind kind = scalar_kind(other);
  Tensor rhs;
  DType common = self.dtype();
  if (kind == ScalarKind::kNone) {
    rhs = to_tensor(other);
    if (promotion_rank(rhs.dtype()) > promotion_rank(common)) common = rhs.dtype();
  } else {
    common = with_scalar(self.dtype(), kind);
  }
  const std::string_view name = op;
  DType compute = common;       // the dtype the op runs in
  std::optional<DType> result;  // a cast of the op's output, when it differs
  const bool boolean = common == DType::kBool;
  if (name == "div" && !ir::is_floating(common)) {
    compute = DType::kFloat32;
  } else if (name == "pow" && !ir::is_floating(common)) {
    if (boolean) {
      throw py::type_error(std::string("Tensor ") + symbol +
                           " on two bool operands is not supported; cast one first, e.g. "
                           "x.astype(ms.int32) or x.astype(ms.float32)");
    }
    compute = DType::kFloat64;
    result = common;
  } else if (name == "sub" && boolean) {
    throw py::type_error(
        std::string("Tensor ") + symbol +
        " on two bool operands is not supported (nor in numpy and PyTorch); cast one "
        "first, e.g. x.astype(ms.int32)");
  } else if ((name == "add" || name == "mul") && boolean) {
    compute = DType::kInt32;
    result = DType::kBool;
  } else if ((name == "less" || name == "greater") && boolean) {
    compute = DType::kInt32;
  }
  const Tensor lhs = cast_to(self, compute);
  rhs = kind == ScalarKind::kNone ? cast_to(rhs, compute) : scalar_tensor(other, compute);
  Tensor out = reverse ? run_op(op, {rhs, lhs})[0] : run_op(op, {lhs, rhs})[0];
  if (result) out = cast_to(out, *result);
  return py::cast(std::move(out));
}

// Tensor(shape=(2, 3), dtype=..., init='zeros' | 'ones'): MindSpore's tensor made from a shape. A
// shape with None dimensions never gets here: it is a DynamicTensor (modeflow/_dynamic.py).
Tensor tensor_of_shape(py::handle shape, py::handle dtype, py::handle init) {
  Shape dims;
  for (py::handle d : py::iter(shape)) {
    if (!py::isinstance<py::int_>(d) || py::isinstance<py::bool_>(d) || d.cast<int64_t>() < 0) {
      throw py::value_error(
          "Tensor(shape=...): a dimension is a size >= 0, or None for a dynamic "
          "declaration; got " +
          echo(py::repr(d).cast<std::string>(), 40));
    }
    dims.push_back(d.cast<int64_t>());
  }
  ir::checked_num_elements(dims, "Tensor(shape=...)");
  const DType type = dtype.is_none() ? DType::kFloat32 : to_dtype(dtype);
  const std::string how = init.is_none() ? "" : py::str(init).cast<std::string>();
  if (how == "zeros") return Tensor::zeros(dims, type);
  if (how == "ones") return Tensor::full(dims, 1.0, type);
  throw py::value_error("Tensor(shape=...) without input_data needs init='zeros' or 'ones' (got " +
                        (init.is_none() ? std::string("none") : "'" + echo(how, 40) + "'") +
                        "); None dimensions declare a dynamic input for Cell.set_inputs instead");
}

}  // namespace

bool is_tensor_like(py::handle value) {
  return py::isinstance<Tensor>(value) || py::isinstance<py::array>(value) ||
         PyBool_Check(value.ptr()) || PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr()) ||
         PyList_Check(value.ptr()) || PyTuple_Check(value.ptr()) ||
         py::isinstance(value, numpy_generic());
}

Tensor to_tensor(py::handle value, std::optional<DType> scalar_dtype) {
  if (py::isinstance<Tensor>(value)) return value.cast<Tensor>();
  if (py::isinstance<py::array>(value)) return from_array(value.cast<py::array>());
  if (PyBool_Check(value.ptr())) return Tensor::full({}, value.ptr() == Py_True, DType::kBool);
  if (PyLong_Check(value.ptr())) return scalar_tensor(value, scalar_dtype.value_or(DType::kInt64));
  if (PyFloat_Check(value.ptr())) {
    const DType dtype =
        scalar_dtype && ir::is_floating(*scalar_dtype) ? *scalar_dtype : DType::kFloat32;
    return Tensor::full({}, value.cast<double>(), dtype);
  }
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    py::array array = py::module_::import("numpy").attr("array")(value);
    // MindSpore: a list of Python floats is float32 (numpy would say float64).
    if (array.dtype().kind() == 'f') array = array.attr("astype")("float32");
    return from_array(array);
  }
  if (py::isinstance(value, numpy_generic()))
    return from_array(py::module_::import("numpy").attr("asarray")(value));
  throw py::type_error("cannot make a Tensor from " + type_name(value) +
                       "; use a Tensor, numpy array, Python number or list");
}

DType to_dtype(py::handle value) {
  if (py::isinstance<DType>(value)) return value.cast<DType>();
  if (PyUnicode_Check(value.ptr())) {
    if (auto parsed = ir::parse_dtype(value.cast<std::string>())) return *parsed;
    throw py::type_error("unknown dtype '" + value.cast<std::string>() +
                         "'; use float32, float64, int32, int64 or bool");
  }
  py::object as_numpy_dtype;
  try {
    as_numpy_dtype = py::module_::import("numpy").attr("dtype")(value);
  } catch (py::error_already_set&) {
    throw py::type_error("cannot use " + type_name(value) +
                         " as a dtype; use ms.float32, ms.float64, ms.int32, ms.int64 or ms.bool_");
  }
  if (auto dtype = dtype_of_numpy(as_numpy_dtype.cast<py::dtype>())) return *dtype;
  throw py::type_error("dtype " + py::str(as_numpy_dtype).cast<std::string>() +
                       " is not supported; use float32, float64, int32, int64 or bool");
}

py::object tensor_or_none(Tensor tensor) {
  if (!tensor.defined()) return py::none();
  return py::cast(std::move(tensor));
}

void bind_tensor(py::module_& m) {
  py::enum_<DType> dtype(m, "dtype", "Element types: float32, float64, int32, int64, bool_.");
  dtype.value("float32", DType::kFloat32)
      .value("float64", DType::kFloat64)
      .value("int32", DType::kInt32)
      .value("int64", DType::kInt64)
      .value("bool_", DType::kBool);
  dtype.def("__str__", [](DType d) { return std::string(ir::dtype_name(d)); });
  dtype.def("__repr__", [](DType d) { return std::string(ir::dtype_name(d)); });
  for (const char* name : {"float32", "float64", "int32", "int64", "bool_"})
    m.attr(name) = dtype.attr(name);
  m.attr("float_") = dtype.attr("float32");
  m.attr("double") = dtype.attr("float64");

  py::class_<Tensor> tensor(m, "Tensor", py::buffer_protocol(),
                            "A tensor of the engine. Tensor(numpy_array | number | list, "
                            "dtype=None): numpy dtypes are kept; floats default to float32.");
  tensor
      .def(py::init([](py::object input_data, py::object dtype, py::object shape, py::object init) {
             if (input_data.is_none() && !shape.is_none())
               return tensor_of_shape(shape, dtype, init);
             if (input_data.is_none())
               throw py::value_error("Tensor(input_data): input_data is required");
             if (!shape.is_none())
               throw py::value_error("Tensor: give input_data or shape (with init), not both");
             Tensor t = to_tensor(input_data);
             if (!dtype.is_none() && to_dtype(dtype) != t.dtype()) {
               t = run_op("cast", {t}, {{"dtype", to_dtype(dtype)}})[0];
             }
             return t;
           }),
           py::arg("input_data") = py::none(), py::arg("dtype") = py::none(),
           py::arg("shape") = py::none(), py::arg("init") = py::none())
      .def_static("from_numpy", [](py::array a) { return from_array(a); })
      .def_static(
          "randn",
          [](std::vector<int64_t> shape, uint64_t seed, double stddev) {
            return Tensor::randn(shape, seed, stddev);
          },
          py::arg("shape"), py::arg("seed") = 0, py::arg("stddev") = 1.0,
          "Normal random values, the same on every machine for a seed (the engine's generator).")
      .def_property_readonly(
          "shape",
          [](const Tensor& t) { return py::tuple(py::cast(std::vector<int64_t>(t.shape()))); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("ndim", [](const Tensor& t) { return t.shape().size(); })
      .def_property_readonly("size", &Tensor::numel)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("asnumpy", &as_numpy, "A read-only numpy view of the data (waits for the value).")
      .def("numpy", &as_numpy)
      .def(
          "__array__",
          [](const Tensor& t, py::object dtype, py::object) {
            py::object array = as_numpy(t);
            return dtype.is_none() ? array : array.attr("astype")(dtype);
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none())
      .def("item", [](const Tensor& t) { return item(t, "item()"); })
      .def("__bool__", [](const Tensor& t) { return item(t, "bool()").cast<bool>(); })
      .def("__float__", [](const Tensor& t) { return item(t, "float()").cast<double>(); })
      .def("__int__", [](const Tensor& t) { return item(t, "int()").cast<int64_t>(); })
      .def("__len__",
           [](const Tensor& t) {
             if (t.shape().empty()) throw py::type_error("len() of a 0-d tensor");
             return t.shape()[0];
           })
      .def("__repr__", &repr)
      .def("__hash__", [](py::object self) { return py::hash(py::int_(size_t(self.ptr()))); })
      .def("astype",
           [](const Tensor& t, py::object dtype) {
             return run_op("cast", {t}, {{"dtype", to_dtype(dtype)}})[0];
           })
      .def("reshape",
           [](const Tensor& t, py::args shape) {
             return run_op("reshape", {t}, {{"shape", dims_from(shape)}})[0];
           })
      .def("transpose",
           [](const Tensor& t, py::args perm) {
             return run_op("transpose", {t}, {{"perm", dims_from(perm)}})[0];
           })
      .def("__neg__", [](const Tensor& t) { return run_op("neg", {t})[0]; })
      .def("__abs__", [](const Tensor& t) { return run_op("abs", {t})[0]; })
      .def("__matmul__",
           [](const Tensor& a, py::handle b) {
             if (!is_tensor_like(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
             Tensor rhs = to_tensor(b, a.dtype());
             const bool plain = a.shape().size() == 2 && rhs.shape().size() == 2;
             return py::cast(run_op(plain ? "matmul" : "batch_matmul", {a, rhs})[0]);
           })
      .def_buffer([](const Tensor& t) {
        ready(t, "the buffer protocol");
        std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
        std::vector<py::ssize_t> strides(shape.size());
        py::ssize_t stride = py::ssize_t(ir::dtype_size(t.dtype()));
        for (size_t i = shape.size(); i-- > 0;) {
          strides[i] = stride;
          stride *= shape[i];
        }
        return py::buffer_info(const_cast<void*>(t.raw_data()),
                               py::ssize_t(ir::dtype_size(t.dtype())), buffer_format(t.dtype()),
                               py::ssize_t(shape.size()), shape, strides, /*readonly=*/true);
      });

  // The operators: each is one registered op, so GRAPH mode traces them like any other.
  // Operands are promoted first (binary() above says how).
  struct Operator {
    const char* name;
    const char* symbol;
    const char* op;
    bool reverse;
  };
  static constexpr Operator kOperators[] = {
      {"__add__", "+", "add", false},     {"__radd__", "+", "add", true},
      {"__sub__", "-", "sub", false},     {"__rsub__", "-", "sub", true},
      {"__mul__", "*", "mul", false},     {"__rmul__", "*", "mul", true},
      {"__truediv__", "/", "div", false}, {"__rtruediv__", "/", "div", true},
      {"__pow__", "**", "pow", false},    {"__rpow__", "**", "pow", true},
      {"__lt__", "<", "less", false},     {"__gt__", ">", "greater", false},
      {"__eq__", "==", "equal", false},
  };
  for (const Operator& op : kOperators) {
    tensor.def(op.name, [op](const Tensor& self, py::handle other) {
      return binary(op.symbol, op.op, self, other, op.reverse);
    });
  }

  py::class_<Parameter, Tensor>(m, "Parameter",
                                "A weight: assigned to a Cell attribute, it becomes a parameter "
                                "of the cell, named by the attribute ('fc.weight').")
      .def(py::init([](py::object default_input, py::object name, bool requires_grad) {
             return Parameter(to_tensor(default_input),
                              name.is_none() ? std::string() : name.cast<std::string>(),
                              requires_grad);
           }),
           py::arg("default_input"), py::arg("name") = py::none(), py::arg("requires_grad") = true)
      .def_readwrite("name", &Parameter::name)
      .def_readwrite("requires_grad", &Parameter::requires_grad)
      .def(
          "set_data",
          [](Parameter& self, py::handle data, bool slice_shape) -> Parameter& {
            Tensor value = to_tensor(data, self.dtype());
            if (value.shape() != self.shape() && !slice_shape) {
              throw py::value_error(
                  "Can not change the shape of Parameter which has been initialized. Current "
                  "shape is " +
                  ir::shape_to_string(self.shape()) + ", and incoming is " +
                  ir::shape_to_string(value.shape()) + ".");
            }
            if (value.shape() != self.shape()) {
              throw py::value_error(
                  "Parameter.set_data: slice_shape keeps this parameter's shape " +
                  ir::shape_to_string(self.shape()) +
                  " for sliced parameters, which modeflow does not shard; the "
                  "incoming shape " +
                  ir::shape_to_string(value.shape()) + " must equal it");
            }
            // MindSpore's rule: a value of a wider type than the parameter's is refused, a
            // narrower one is cast (the order of implicit promotion).
            if (promotion_rank(value.dtype()) > promotion_rank(self.dtype())) {
              throw py::type_error("Parameter.set_data: the incoming data type " +
                                   std::string(ir::dtype_name(value.dtype())) +
                                   " is wider than the parameter's " +
                                   std::string(ir::dtype_name(self.dtype())) + "; cast it first");
            }
            if (value.dtype() != self.dtype()) {
              value = run_op("cast", {value}, {{"dtype", self.dtype()}})[0];
            }
            // In place: every holder of this parameter (the cell, an optimizer) sees the value.
            run_op("assign", {self, value});
            return self;
          },
          py::arg("data"), py::arg("slice_shape") = false,
          "Sets the parameter's value in place (MindSpore's Parameter.set_data): same shape; a "
          "value of a narrower type is cast, a wider one is a TypeError.");
}

}  // namespace mf::python
