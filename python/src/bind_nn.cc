// modeflow.nn: Cell subclassable in Python, the C++ layers, and what loads networks
// (modeflow.models, modeflow.onnx). A Python cell is an nn::Cell whose forward() calls the Python
// construct(), so scopes, tracing, GRAPH mode, jit, dumps, fusion and the compile cache are the
// engine's own: the first GRAPH-mode call traces construct() once, later calls run the compiled
// graph without entering Python.
#include <pybind11/stl.h>

#include <unordered_set>

#include "base/error.h"
#include "base/stack_guard.h"
#include "bindings.h"
#include "engine/eager/ir_runner.h"
#include "engine/engine_state.h"
#include "engine/graph/graph_mode.h"
#include "engine/io/model_cell.h"
#include "engine/io/model_file.h"
#include "engine/models/registry.h"
#include "engine/nn/cell.h"
#include "engine/nn/layers.h"

namespace mf::python {
namespace {

using CellPtr = std::shared_ptr<nn::Cell>;

// The trampoline: a cell defined in Python.
class PyCell : public nn::Cell {
 public:
  using nn::Cell::adopt_shared;
  using nn::Cell::Cell;

  Tensor forward(const Tensor& x) override {
    py::gil_scoped_acquire gil;
    // A cell may call itself (its recursion bounded by its own base case, max_call_depth while
    // tracing and Python's recursion limit); each level's C++ frames are checked too.
    MF_CHECK(enough_stack_left(), InvalidArgument, class_name(),
             " calls cells nested too deeply: ", stack_used_up_message());
    py::function construct = py::get_override(static_cast<const nn::Cell*>(this), "construct");
    if (!construct) construct = own_construct();
    if (!construct) {
      throw py::type_error(class_name() + " defines no construct(self, x); a Cell subclass must");
    }
    py::tuple args(1 + extra_inputs().size());
    args[0] = py::cast(x);
    for (size_t i = 0; i < extra_inputs().size(); ++i) args[i + 1] = py::cast(extra_inputs()[i]);
    py::object result = construct(*args);
    if (!py::isinstance<Tensor>(result)) {
      throw py::type_error(class_name() + ".construct must return one Tensor, got " +
                           py::str(py::type::of(result).attr("__name__")).cast<std::string>() +
                           " (the engine's cells have one output)");
    }
    return result.cast<Tensor>();
  }

  // A Python `bprop(self, x, out, dout)` method is the cell's custom backward.
  bool has_bprop() const override {
    py::gil_scoped_acquire gil;
    const py::detail::type_info* type = py::detail::get_type_info(typeid(nn::Cell));
    const py::handle self = py::detail::get_object_handle(static_cast<const nn::Cell*>(this), type);
    return self && py::hasattr(py::type::of(self), "bprop");
  }

  Tensor bprop(const Tensor& x, const Tensor& out, const Tensor& dout) override {
    py::gil_scoped_acquire gil;
    const py::detail::type_info* type = py::detail::get_type_info(typeid(nn::Cell));
    const py::handle self = py::detail::get_object_handle(static_cast<const nn::Cell*>(this), type);
    py::object result = py::getattr(self, "bprop")(x, out, dout);
    if (result.is_none()) {
      throw py::type_error("The function 'bprop' of " + class_name() +
                           " returned None: it must return a tuple of one gradient per input");
    }
    py::tuple grads =
        py::isinstance<py::tuple>(result) ? result.cast<py::tuple>() : py::make_tuple(result);
    const bool check = engine::current_policy()->check_bprop.value;
    if (check && grads.size() != 1) {
      throw py::type_error("The function 'bprop' of " + class_name() +
                           ": the number of return values(gradients) must be equal to the number "
                           "of input arguments except 'out' and 'dout', which is: 1, but got: " +
                           std::to_string(grads.size()) + ".");
    }
    if (grads.size() == 0 || grads[0].is_none() || !py::isinstance<Tensor>(grads[0])) {
      throw py::type_error("The function 'bprop' of " + class_name() +
                           " must return Tensors, one gradient per input");
    }
    Tensor dx = grads[0].cast<Tensor>();
    if (check && dx.dtype() != x.dtype()) {
      throw py::type_error("For 'bprop' of " + class_name() +
                           ", the gradient of the 0th arg should have the same dtype as the 0th "
                           "arg, but the dtype of the 0th arg is: " +
                           std::string(ir::dtype_name(x.dtype())) +
                           ", the dtype of the gradient "
                           "is: " +
                           std::string(ir::dtype_name(dx.dtype())) + ".");
    }
    return dx;
  }

  Tensor& add_parameter(std::string name, Tensor value, bool requires_grad) {
    return register_parameter(std::move(name), std::move(value), requires_grad);
  }

 private:
  // pybind11 finds no override while that override is running on this same object (a construct
  // that calls self(x)); the subclass's own construct, when it has one, is still the one to run.
  py::function own_construct() const {
    const py::detail::type_info* type = py::detail::get_type_info(typeid(nn::Cell));
    const py::handle self = py::detail::get_object_handle(static_cast<const nn::Cell*>(this), type);
    if (!self) return {};
    const py::object own = py::getattr(py::type::of(self), "construct", py::none());
    const py::object base = py::type::of<nn::Cell>().attr("construct");
    if (own.is_none() || own.is(base)) return {};
    return py::getattr(self, "construct");
  }
};

py::handle object_setattr() {
  static py::handle function =
      py::object(py::module_::import("builtins").attr("object").attr("__setattr__")).release();
  return function;
}

std::optional<Tensor> own_parameter(const nn::Cell& cell, const std::string& name) {
  for (const auto& [parameter, value] : cell.named_parameters()) {
    if (parameter == name) return value;
  }
  return std::nullopt;
}

// The cell's parameters as MindSpore hands them out: by their dotted path from this cell, as
// Parameters named by their path from the top of the cells that adopted it ('fc1.weight', also for
// `net.fc1.weight`), with their requires_grad, sharing the cell's tensors (set_data writes
// through).
std::vector<std::pair<std::string, Parameter>> named_parameter_objects(const nn::Cell& cell) {
  std::unordered_set<std::string> trained;
  for (const auto& [name, value] : cell.trainable_params()) trained.insert(name);
  const std::string prefix = cell.parameter_name_prefix();
  std::vector<std::pair<std::string, Parameter>> out;
  for (const auto& [name, value] : cell.named_parameters()) {
    out.emplace_back(name, Parameter(value, prefix + name, trained.count(name) != 0));
  }
  return out;
}

// The cell behind a Python object, or null before super().__init__() has built it.
nn::Cell* initialized_cell(py::handle self) {
  auto* instance = reinterpret_cast<py::detail::instance*>(self.ptr());
  const py::detail::value_and_holder v_h = instance->get_value_and_holder();
  if (!v_h || !v_h.holder_constructed()) return nullptr;
  return self.cast<nn::Cell*>();
}

nn::Cell& cell_of(py::handle self) {
  nn::Cell* cell = initialized_cell(self);
  if (cell == nullptr) {
    throw py::type_error("the Cell is not initialized: call super().__init__() first in " +
                         py::str(py::type::of(self).attr("__name__")).cast<std::string>() +
                         ".__init__");
  }
  return *cell;
}

// A child as a Python object: its own Python object when it has one, else a view that keeps the
// parent (which owns the child) alive.
py::object child_object(nn::Cell* child, py::handle parent) {
  return py::cast(child, py::return_value_policy::reference_internal, parent);
}

PyCell& python_cell(nn::Cell& cell, const std::string& what) {
  auto* python = dynamic_cast<PyCell*>(&cell);
  if (python == nullptr) {
    throw py::type_error("cannot add " + what + " to the built-in layer " + cell.class_name() +
                         "; define a Cell subclass in Python and hold it there");
  }
  return *python;
}

std::string level_of(py::handle config) {
  if (config.is_none()) return "";
  if (PyUnicode_Check(config.ptr())) return config.cast<std::string>();
  if (PyDict_Check(config.ptr())) {
    py::dict dict = config.cast<py::dict>();
    return dict.contains("jit_level") ? dict["jit_level"].cast<std::string>() : "";
  }
  if (py::hasattr(config, "jit_level")) {
    py::object level = config.attr("jit_level");
    return level.is_none() ? "" : level.cast<std::string>();
  }
  throw py::type_error("a jit config is a JitConfig, a dict with 'jit_level' or a level string");
}

py::dict report_dict(const engine::GraphRunReport& r) {
  py::dict d;
  d["compiled"] = r.compiled;
  d["specialized"] = r.specialized;
  d["dynamic_note"] = r.dynamic_note;
  d["prepared_shapes"] = r.prepared_shapes;
  d["recompile_reason"] = r.recompile_reason;
  d["trace_ms"] = r.trace_ms;
  d["compile_ms"] = r.compile_ms;
  d["run_ms"] = r.run_ms;
  d["planned_peak_bytes"] = r.planned_peak_bytes;
  d["prepared_kernels"] = r.prepared_kernels;
  d["memory_regime"] = r.memory_regime;
  d["executor"] = r.executor;
  d["jit_level"] = r.jit_level;
  d["fusion_level"] = r.fusion_level;
  d["jit_region"] = r.jit_region;
  d["ran"] = r.ran;
  py::list dumps;
  for (const auto& file : r.dump_files) dumps.append(file.string());
  d["dump_files"] = dumps;
  d["cache_hit"] = r.cache_hit;
  d["cache_key"] = r.cache_key;
  d["cache_note"] = r.cache_note;
  return d;
}

py::object call_cell(nn::Cell& cell, const py::args& args, const py::kwargs& kwargs) {
  if (!kwargs.empty()) {
    throw py::type_error(cell.class_name() +
                         " takes its inputs by position; pass the keyword arguments in "
                         "construct's order");
  }
  if (args.size() == 0) throw py::type_error(cell.class_name() + " takes at least one input");
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_none()) {
      throw py::type_error(cell.class_name() + ": input " + std::to_string(i) +
                           " is None; a cell's inputs are tensors");
    }
    if (py::isinstance<py::tuple>(args[i]) || py::isinstance<py::list>(args[i])) {
      for (py::handle item : args[i]) {
        if (py::isinstance<Tensor>(item)) {
          throw py::type_error(cell.class_name() + ": input " + std::to_string(i) +
                               " is a sequence of Tensors; pass each Tensor as an input of its "
                               "own (construct(self, x, a, b))");
        }
      }
    }
    inputs.push_back(to_tensor(args[i]));
  }
  const std::source_location where = python_call_site();
  Tensor y;
  {
    py::gil_scoped_release release;  // Python construct() takes it back while it traces or runs
    y = inputs.size() == 1 ? cell(inputs[0], where) : cell(std::span<const Tensor>(inputs), where);
  }
  flush_warnings();
  return tensor_or_none(std::move(y));
}

// An ONNX model ready to run (engine::ModelFile): op by op in PYNATIVE mode and compiled in GRAPH
// mode, like `mf run model.onnx`. Python adds positional inputs and its own exception types.
using OnnxModel = engine::ModelFile;

py::object run_onnx(OnnxModel& model, const py::args& args, const py::kwargs& kwargs) {
  const std::vector<std::string>& names = model.input_names();
  if (args.size() > names.size()) {
    throw py::type_error("the model takes " + std::to_string(names.size()) + " inputs, got " +
                         std::to_string(args.size()));
  }
  std::map<std::string, Tensor> given;
  for (size_t i = 0; i < args.size(); ++i) given[names[i]] = to_tensor(args[i]);
  for (auto [key, value] : kwargs) {
    const std::string name = key.cast<std::string>();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      throw py::type_error("the model has no input '" + echo(name) + "'; its inputs: " + known);
    }
    given[name] = to_tensor(value);
  }
  for (const std::string& name : names) {
    if (given.count(name) == 0) throw py::type_error("missing input '" + echo(name) + "'");
  }
  std::vector<std::pair<std::string, Tensor>> outputs;
  {
    py::gil_scoped_release release;
    outputs = model.run(given, 0);
  }
  flush_warnings();
  if (outputs.size() == 1) return tensor_or_none(outputs[0].second);
  py::tuple tuple(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) tuple[i] = tensor_or_none(outputs[i].second);
  return tuple;
}

void bind_cell(py::module_& nn_module) {
  py::class_<nn::Cell, PyCell, CellPtr> cell(
      nn_module, "Cell",
      "MindSpore's Cell: subclass it, assign child cells and ms.Parameter weights to attributes in "
      "__init__ (after super().__init__()), and write construct(self, x, ...) returning one "
      "Tensor.");
  cell.def(
      "__init__",
      [](py::detail::value_and_holder& v_h, py::args, py::kwargs) {
        py::handle type(reinterpret_cast<PyObject*>(Py_TYPE(v_h.inst)));
        auto* created = new PyCell(py::str(type.attr("__name__")).cast<std::string>());
        v_h.value_ptr() = static_cast<nn::Cell*>(created);
        // @ms.jit on construct marks the class's cells for jit (MindSpore 2.x).
        py::object construct = py::getattr(type, "construct", py::none());
        if (py::hasattr(construct, "__modeflow_jit_level__")) {
          created->set_jit_config({construct.attr("__modeflow_jit_level__").cast<std::string>()});
        }
      },
      py::detail::is_new_style_constructor());
  cell.def("__call__", &call_cell)
      .def(
          "construct",
          [](nn::Cell& self, const Tensor& x) {
            py::gil_scoped_release release;
            return self.forward(x);
          },
          "The cell's computation without entering its scope.")
      .def("__setattr__",
           [](py::handle self, py::str name, py::object value) {
             if (py::isinstance<nn::Cell>(value)) {
               python_cell(cell_of(self), "child cells")
                   .adopt_shared(name.cast<std::string>(), value.cast<CellPtr>());
             } else if (py::isinstance<Parameter>(value)) {
               nn::Cell& owner = cell_of(self);
               const std::string key = name.cast<std::string>();
               if (key.find('.') != std::string::npos)
                 throw py::value_error("a parameter name cannot contain '.': " + key);
               const bool requires_grad = value.cast<const Parameter&>().requires_grad;
               if (own_parameter(owner, key)) {
                 // Any cell's parameter may be replaced (and frozen: requires_grad=False).
                 owner.set_parameter(key, value.cast<const Tensor&>());
                 owner.set_requires_grad(key, requires_grad);
               } else {
                 python_cell(owner, "parameters")
                     .add_parameter(key, value.cast<const Tensor&>(), requires_grad);
               }
               return;  // not kept in __dict__: __getattr__ reads the cell's current value
             }
             object_setattr()(self, name, value);
           })
      .def("__getattr__",
           [](py::handle self, const std::string& name) -> py::object {
             nn::Cell* cell = initialized_cell(self);
             if (cell != nullptr && name.find('.') == std::string::npos) {
               for (auto& [path, parameter] : named_parameter_objects(*cell)) {
                 if (path == name) return py::cast(std::move(parameter));
               }
             }
             throw py::attribute_error(
                 "'" + py::str(py::type::of(self).attr("__name__")).cast<std::string>() +
                 "' object has no attribute '" + name + "'");
           })
      .def(
          "_declare_inputs",
          [](nn::Cell& self,
             const std::vector<std::pair<std::vector<std::pair<int64_t, std::string>>, DType>>&
                 inputs) {
            std::vector<std::pair<ir::SymbolicShape, DType>> declared;
            for (const auto& [dims, dtype] : inputs) {
              ir::SymbolicShape shape;
              for (const auto& [size, symbol] : dims) shape.push_back({size, symbol});
              declared.emplace_back(std::move(shape), dtype);
            }
            self.set_inputs(std::move(declared));
          },
          "Cell.set_inputs's engine side: per input, (size or -1, symbol) per dimension and the "
          "dtype.")
      .def("_declared_inputs",
           [](const nn::Cell& self) {
             py::list out;
             if (!self.declared_input()) return out;
             const auto add = [&](const ir::InputSignature& s) {
               std::vector<std::pair<int64_t, std::string>> dims;
               for (const ir::SymbolicDim& d : s.shape) dims.emplace_back(d.size, d.symbol);
               out.append(py::make_tuple(dims, s.dtype));
             };
             add(*self.declared_input());
             for (const ir::InputSignature& s : self.declared_extra_inputs()) add(s);
             return out;
           })
      .def_property_readonly("cls_name", &nn::Cell::class_name)
      .def_property_readonly("instance_name", &nn::Cell::instance_name)
      .def("parameters_and_names",
           [](const nn::Cell& self) { return py::cast(named_parameter_objects(self)); })
      .def(
          "set_train",
          [](py::object self, bool mode) {
            cell_of(self).set_train(mode);
            return self;
          },
          py::arg("mode") = true,
          "Training mode (MindSpore's Cell.set_train) for this cell and every descendant.")
      .def_property_readonly("training", &nn::Cell::training)
      .def(
          "recompute",
          [](py::object self, py::kwargs kwargs) {
            // MindSpore's keywords all concern communication of parallel modes, which a data
            // parallel group does not recompute: each is checked and has no further effect.
            for (const auto& [key, value] : kwargs) {
              const std::string name = py::str(key);
              if (name != "mp_comm_recompute" && name != "parallel_optimizer_comm_recompute" &&
                  name != "recompute_slice_activation") {
                throw py::type_error("recompute() got an unexpected keyword argument '" +
                                     echo(name, 40) + "'");
              }
              if (!py::isinstance<py::bool_>(value)) {
                throw py::type_error("For 'recompute', the type of '" + name +
                                     "' must be bool, but got " +
                                     echo(py::str(py::type::of(value)).cast<std::string>(), 40));
              }
            }
            cell_of(self).recompute(true);
            return self;
          },
          "MindSpore's Cell.recompute: the cell's activations are not kept for the backward but "
          "computed again just before it needs them, in both modes (less memory, one more "
          "forward of the cell, the same gradients).")
      .def_property_readonly("_recompute", &nn::Cell::is_recompute)
      .def("parameters_dict",
           [](const nn::Cell& self) {
             py::dict out;
             for (auto& [name, parameter] : named_parameter_objects(self)) {
               out[py::str(name)] = std::move(parameter);
             }
             return out;
           })
      .def("get_parameters",
           [](const nn::Cell& self) {
             py::list out;
             for (auto& [name, parameter] : named_parameter_objects(self)) {
               out.append(std::move(parameter));
             }
             return out;
           })
      .def("set_parameter", [](nn::Cell& self, const std::string& name,
                               py::handle value) { self.set_parameter(name, to_tensor(value)); })
      .def("name_cells",
           [](py::object self) {
             py::dict out;
             for (const auto& [name, child] : cell_of(self).named_children())
               out[py::str(name)] = child_object(child, self);
             return out;
           })
      .def("cells_and_names",
           [](py::object self) {
             py::list out;
             out.append(py::make_tuple("", self));
             for (const auto& [name, child] : cell_of(self).named_descendants())
               out.append(py::make_tuple(name, child_object(child, self)));
             return out;
           })
      .def("set_jit_config",
           [](nn::Cell& self, py::handle config) { self.set_jit_config({level_of(config)}); })
      .def("set_jit", &nn::Cell::set_jit, py::arg("jit") = true)
      .def_property_readonly("jit", &nn::Cell::jit)
      .def(
          "compile_report", [](const nn::Cell& self) { return report_dict(self.graph_report()); },
          "What the last compiled call did: compiled or reused, times, executor, dumps, cache.")
      .def("clear_compiled", &nn::Cell::clear_compiled);
}

// weight_init / bias_init (MindSpore's): None keeps the engine's values drawn from the seed
// (MindSpore's default distributions: HeUniform(sqrt(5)) for the weight, uniform within
// 1/sqrt(fan_in) for the bias); anything else is made at the parameter's shape by
// modeflow.common.initializer, drawn with numpy from (seed, stream). A bias_init without a bias is
// ignored, as in MindSpore.
void initialize_parameter(nn::Cell& cell, const char* layer, const std::string& name,
                          py::handle init, uint64_t seed, int stream) {
  if (init.is_none()) return;
  const std::optional<Tensor> current = own_parameter(cell, name);
  if (!current) return;
  const py::tuple shape(py::cast(std::vector<int64_t>(current->shape())));
  py::object value = py::module_::import("modeflow.common.initializer")
                         .attr("_parameter_value")(init, shape, seed, stream, layer, name);
  cell.set_parameter(name, value.cast<Tensor>());
}

void bind_layers(py::module_& m) {
  using py::arg;
  // MindSpore's signatures: Dense(in_channels, out_channels, weight_init=None, bias_init=None,
  // has_bias=True, activation=None); Conv2d(..., stride=1, pad_mode='same', padding=0,
  // dilation=1, group=1, has_bias=False, weight_init=None, bias_init=None);
  // MaxPool2d(kernel_size=1, stride=1, pad_mode='valid', padding=0). seed= is modeflow's: the
  // engine's generator.
  py::class_<nn::Dense, nn::Cell, std::shared_ptr<nn::Dense>>(m, "Dense")
      .def(py::init([](int64_t in, int64_t out, py::object weight_init, py::object bias_init,
                       bool has_bias, py::object activation, uint64_t seed) {
             if (!activation.is_none()) {
               const std::string message =
                   "For 'Dense', activation is not supported by modeflow (got " +
                   py::repr(activation).cast<std::string>() +
                   "); apply it after the layer: ms.ops.relu(dense(x)), or an nn.ReLU() cell";
               PyErr_SetString(PyExc_NotImplementedError, message.c_str());
               throw py::error_already_set();
             }
             auto dense = std::make_shared<nn::Dense>(in, out, seed, has_bias);
             initialize_parameter(*dense, "Dense", "weight", weight_init, seed, 0);
             initialize_parameter(*dense, "Dense", "bias", bias_init, seed, 1);
             return dense;
           }),
           arg("in_channels"), arg("out_channels"), arg("weight_init") = py::none(),
           arg("bias_init") = py::none(), arg("has_bias") = true, arg("activation") = py::none(),
           py::kw_only(), arg("seed") = 0);
  py::class_<nn::Conv2d, nn::Cell, std::shared_ptr<nn::Conv2d>>(m, "Conv2d")
      .def(
          py::init([](int64_t in, int64_t out, int64_t kernel, int64_t stride,
                      const std::string& pad_mode, int64_t padding, int64_t dilation, int64_t group,
                      bool has_bias, py::object weight_init, py::object bias_init, uint64_t seed) {
            const nn::Conv2dConfig config{
                .in_channels = in,
                .out_channels = out,
                .kernel_size = kernel,
                .stride = stride,
                .padding = padding,
                .dilation = dilation,
                .groups = group,
                .has_bias = has_bias,
                .pad_mode = nn::parse_pad_mode(pad_mode, "Conv2d"),
            };
            auto conv = std::make_shared<nn::Conv2d>(config, seed);
            initialize_parameter(*conv, "Conv2d", "weight", weight_init, seed, 0);
            initialize_parameter(*conv, "Conv2d", "bias", bias_init, seed, 1);
            return conv;
          }),
          arg("in_channels"), arg("out_channels"), arg("kernel_size"), arg("stride") = 1,
          arg("pad_mode") = "same", arg("padding") = 0, arg("dilation") = 1, arg("group") = 1,
          arg("has_bias") = false, arg("weight_init") = py::none(), arg("bias_init") = py::none(),
          py::kw_only(), arg("seed") = 0);
  py::class_<nn::ReLU, nn::Cell, std::shared_ptr<nn::ReLU>>(m, "ReLU").def(py::init<>());
  py::class_<nn::GELU, nn::Cell, std::shared_ptr<nn::GELU>>(m, "GELU").def(
      py::init<bool>(), arg("approximate") = true);
  py::class_<nn::MaxPool2d, nn::Cell, std::shared_ptr<nn::MaxPool2d>>(m, "MaxPool2d")
      .def(py::init(
               [](int64_t kernel, int64_t stride, const std::string& pad_mode, int64_t padding) {
                 return std::make_shared<nn::MaxPool2d>(
                     kernel, stride, nn::parse_pad_mode(pad_mode, "MaxPool2d"), padding);
               }),
           arg("kernel_size") = 1, arg("stride") = 1, arg("pad_mode") = "valid",
           arg("padding") = 0);
  py::class_<nn::Flatten, nn::Cell, std::shared_ptr<nn::Flatten>>(m, "Flatten").def(py::init<>());
  py::class_<nn::BatchNorm2d, nn::Cell, std::shared_ptr<nn::BatchNorm2d>>(m, "BatchNorm2d")
      .def(py::init([](int64_t num_features, double eps, double momentum, bool affine,
                       py::object gamma_init, py::object beta_init, py::object moving_mean_init,
                       py::object moving_var_init, py::object use_batch_statistics,
                       const std::string& data_format, uint64_t seed) {
             if (data_format != "NCHW") {
               throw py::value_error("BatchNorm2d: data_format must be 'NCHW', got '" +
                                     echo(data_format) + "'");
             }
             nn::BatchNormConfig config{eps, momentum, affine, std::nullopt};
             if (!use_batch_statistics.is_none()) {
               config.use_batch_statistics = use_batch_statistics.cast<bool>();
             }
             auto bn = std::make_shared<nn::BatchNorm2d>(num_features, config);
             // Any of MindSpore's initializers (a name, a number, an Initializer, a Tensor of the
             // parameter's shape), as Dense's weight_init.
             initialize_parameter(*bn, "BatchNorm2d", "gamma", gamma_init, seed, 0);
             initialize_parameter(*bn, "BatchNorm2d", "beta", beta_init, seed, 1);
             initialize_parameter(*bn, "BatchNorm2d", "moving_mean", moving_mean_init, seed, 2);
             initialize_parameter(*bn, "BatchNorm2d", "moving_variance", moving_var_init, seed, 3);
             return bn;
           }),
           arg("num_features"), arg("eps") = 1e-5, arg("momentum") = 0.9, arg("affine") = true,
           arg("gamma_init") = "ones", arg("beta_init") = "zeros",
           arg("moving_mean_init") = "zeros", arg("moving_var_init") = "ones",
           arg("use_batch_statistics") = py::none(), arg("data_format") = "NCHW", py::kw_only(),
           arg("seed") = 0);
  py::class_<nn::Dropout, nn::Cell, std::shared_ptr<nn::Dropout>>(m, "Dropout")
      .def(py::init([](py::object keep_prob, py::object p, py::object dtype, py::object seed) {
             (void)dtype;  // the input's dtype is kept, as MindSpore's float types
             if (!keep_prob.is_none() && !p.is_none()) {
               throw py::value_error("Dropout: give p or keep_prob, not both");
             }
             double drop = 0.5;
             if (!p.is_none()) drop = p.cast<double>();
             if (!keep_prob.is_none()) drop = 1.0 - keep_prob.cast<double>();
             if (!(drop >= 0 && drop < 1)) {
               throw py::value_error("Dropout: p must be in [0, 1), got " + std::to_string(drop));
             }
             return std::make_shared<nn::Dropout>(
                 drop,
                 seed.is_none() ? std::nullopt : std::optional<uint64_t>(seed.cast<uint64_t>()));
           }),
           arg("keep_prob") = py::none(), arg("p") = py::none(), arg("dtype") = py::none(),
           py::kw_only(), arg("seed") = py::none());
  py::class_<nn::LayerNorm, nn::Cell, std::shared_ptr<nn::LayerNorm>>(m, "LayerNorm")
      .def(py::init([](py::object shape, double epsilon) {
             // MindSpore passes normalized_shape as a tuple; the engine normalizes the last axis.
             const int64_t features = PyLong_Check(shape.ptr())
                                          ? shape.cast<int64_t>()
                                          : shape.cast<std::vector<int64_t>>().back();
             return std::make_shared<nn::LayerNorm>(features, epsilon);
           }),
           arg("normalized_shape"), arg("epsilon") = 1e-5);
  py::class_<nn::Softmax, nn::Cell, std::shared_ptr<nn::Softmax>>(m, "Softmax")
      .def(py::init<int64_t>(), arg("axis") = -1);
  py::class_<nn::MultiHeadAttention, nn::Cell, std::shared_ptr<nn::MultiHeadAttention>>(
      m, "MultiHeadAttention")
      .def(py::init([](int64_t d_model, int64_t heads, uint64_t seed) {
             return std::make_shared<nn::MultiHeadAttention>(d_model, heads, seed);
           }),
           arg("d_model"), arg("num_heads"), py::kw_only(), arg("seed") = 0);
  py::class_<nn::TransformerEncoderLayer, nn::Cell, std::shared_ptr<nn::TransformerEncoderLayer>>(
      m, "TransformerEncoderLayer")
      .def(py::init([](int64_t d_model, int64_t heads, int64_t ffn, uint64_t seed) {
             return std::make_shared<nn::TransformerEncoderLayer>(d_model, heads, ffn, seed);
           }),
           arg("d_model"), arg("nhead"), arg("dim_feedforward"), py::kw_only(), arg("seed") = 0);
}

void bind_models(py::module_ m) {
  m.def("names", [] {
    std::vector<std::string> names;
    for (const auto& spec : models::all_nets()) names.push_back(spec.name);
    return names;
  });
  m.def("describe", [] {
    py::dict out;
    for (const auto& spec : models::all_nets()) out[py::str(spec.name)] = spec.description;
    return out;
  });
  m.def(
      "load",
      [](const std::string& name, uint64_t seed) -> CellPtr {
        return models::find_net(name).make(seed);
      },
      py::arg("name"), py::arg("seed") = 0,
      "A sample network (`mf nets`) built from its seed: the same weights as `mf run NAME`.");
  m.def(
      "make_input",
      [](const std::string& name, uint64_t seed) {
        return models::find_net(name).make_input(seed);
      },
      py::arg("name"), py::arg("seed") = 0, "The input `mf run NAME --seed SEED` feeds it.");
}

void bind_onnx(py::module_ m) {
  py::class_<OnnxModel>(m, "OnnxModel")
      .def("__call__", &run_onnx)
      .def_property_readonly("input_names", &OnnxModel::input_names)
      .def_property_readonly("output_names", &OnnxModel::output_names)
      .def_property_readonly("opset", &OnnxModel::opset)
      .def_property_readonly("producer", &OnnxModel::producer)
      .def("compile_report",
           [](const OnnxModel& o) { return report_dict(o.runner().graph_report()); })
      .def_property_readonly(
          "input_signature",
          [](const OnnxModel& o) { return ir::signature_to_string(o.signature()); })
      .def_property_readonly("prepared_shapes", &OnnxModel::prepared_shapes);
  m.def(
      "load",
      [](const std::string& path) {
        MF_CHECK(engine::model_format(path) == engine::ModelFormat::kOnnx, InvalidArgument, "'",
                 echo(path), "' is not an .onnx file");
        std::unique_ptr<OnnxModel> model;
        {
          py::gil_scoped_release release;
          model = std::make_unique<OnnxModel>(OnnxModel::load(path));
        }
        flush_warnings();
        return model;
      },
      py::arg("path"),
      "Imports an ONNX model (opsets 1-18); call it with its inputs (positional, or by ONNX "
      "name).");
  py::class_<engine::ModelCell, nn::Cell, std::shared_ptr<engine::ModelCell>>(
      m, "ModelCell",
      "An ONNX model as a Cell, called with its inputs in the file's order: its initializers are "
      "the cell's parameters "
      "('fc.weight' written 'fc_weight'), so ms.grad, value_and_grad and TrainOneStepCell reach "
      "them, in both modes.")
      .def_property_readonly("input_name", &engine::ModelCell::input_name);
  m.def(
      "load_cell",
      [](const std::string& path, uint64_t seed) {
        MF_CHECK(engine::model_format(path) == engine::ModelFormat::kOnnx, InvalidArgument, "'",
                 echo(path), "' is not an .onnx file");
        std::shared_ptr<engine::ModelCell> cell;
        {
          py::gil_scoped_release release;
          cell = std::make_shared<engine::ModelCell>(path, seed);
        }
        flush_warnings();
        return cell;
      },
      py::arg("path"), py::arg("seed") = 0,
      "Imports an ONNX model of one input as a Cell whose parameters are its weights, to "
      "differentiate or train it.");
}

}  // namespace

void bind_nn(py::module_& m) {
  py::module_ nn_module = m.def_submodule("nn", "Cell and the layers.");
  bind_cell(nn_module);
  bind_layers(nn_module);
  bind_models(m.def_submodule("models", "The sample networks of `mf nets`."));
  bind_onnx(m.def_submodule("onnx", "ONNX models."));
}

}  // namespace mf::python
