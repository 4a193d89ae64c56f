// modeflow._modeflow.autodiff: the engine side of ms.grad / ms.value_and_grad / GradOperation
// (python/modeflow/_grad.py writes MindSpore's argument handling and return structures over it).
// GradFunction differentiates a cell (GRAPH mode: one compiled graph, forward and backward;
// PYNATIVE: a tape); Tape records a Python function's ops, in either mode.
#include <pybind11/stl.h>

#include <memory>

#include "bindings.h"
#include "engine/autodiff/grad.h"
#include "engine/autodiff/tape.h"
#include "engine/engine_state.h"
#include "engine/nn/cell.h"

namespace mf::python {
namespace {

std::vector<Tensor> tensors_of(const py::sequence& items) {
  std::vector<Tensor> out;
  for (py::handle item : items) out.push_back(item.cast<Tensor>());
  return out;
}

// A tape held by a Python `with` block on the thread that entered it.
class PyTape {
 public:
  void enter() {
    if (tape_) throw py::value_error("this gradient tape is already recording");
    tape_ = std::make_unique<engine::GradTape>();
  }
  void exit() { tape_.reset(); }
  void watch(const Tensor& t, const std::string& what) { live().watch(t, what); }
  std::vector<Tensor> gradients(const Tensor& output, py::object sens, const py::sequence& wrt) {
    const Tensor seed = sens.is_none() ? Tensor() : to_tensor(sens);
    std::vector<Tensor> targets = tensors_of(wrt);
    std::vector<Tensor> grads;
    {
      py::gil_scoped_release release;
      grads = live().gradients(output, seed, targets);
    }
    flush_warnings();
    return grads;
  }

 private:
  engine::GradTape& live() {
    if (!tape_)
      throw py::value_error("the gradient tape is not recording (use it in a with block)");
    return *tape_;
  }
  std::unique_ptr<engine::GradTape> tape_;
};

// A GradFunction keeping its cell alive (Python owns cells through shared pointers).
struct PyGradFunction {
  std::shared_ptr<nn::Cell> cell;
  GradFunction function;
};

}  // namespace

void bind_autodiff(py::module_& m) {
  py::module_ autodiff = m.def_submodule("autodiff", "the engine side of modeflow's gradients");
  autodiff.def(
      "grad_for_scalar", [] { return engine::current_policy()->grad_for_scalar.value; },
      "The context's grad_for_scalar decision: Python numbers are differentiable inputs.");
  py::class_<PyTape>(autodiff, "Tape", "Records the ops of this thread while in a with block.")
      .def(py::init<>())
      .def(
          "__enter__",
          [](PyTape& self) -> PyTape& {
            self.enter();
            return self;
          },
          py::return_value_policy::reference)
      .def("__exit__", [](PyTape& self, py::args) { self.exit(); })
      .def("watch", &PyTape::watch, py::arg("tensor"), py::arg("what"))
      .def("gradients", &PyTape::gradients, py::arg("output"), py::arg("sens"), py::arg("wrt"));

  py::class_<PyGradFunction>(autodiff, "GradFunction",
                             "The gradient of a cell with respect to its input and weights.")
      .def(py::init([](std::shared_ptr<nn::Cell> cell, bool input, const py::sequence& weights,
                       bool sens_param) {
             GradSpec spec{input, tensors_of(weights), sens_param};
             return std::make_unique<PyGradFunction>(
                 PyGradFunction{cell, GradFunction(*cell, std::move(spec))});
           }),
           py::arg("cell"), py::arg("input"), py::arg("weights"), py::arg("sens_param"))
      .def(
          "__call__",
          [](PyGradFunction& self, py::sequence args, py::object sens) {
            std::vector<Tensor> inputs;
            for (py::handle arg : args) inputs.push_back(to_tensor(arg));
            const Tensor seed = sens.is_none() ? Tensor() : to_tensor(sens);
            const std::source_location where = python_call_site();
            Gradients g;
            {
              py::gil_scoped_release release;  // construct() takes it back while it traces
              g = self.function(std::span<const Tensor>(inputs), seed, where);
            }
            flush_warnings();
            py::tuple weights(g.weights.size());
            for (size_t i = 0; i < g.weights.size(); ++i) weights[i] = py::cast(g.weights[i]);
            return py::make_tuple(g.value, tensor_or_none(g.input), weights);
          },
          py::arg("inputs"), py::arg("sens") = py::none())
      .def("compile_report", [](const PyGradFunction& self) {
        const engine::GraphRunReport& r = self.function.graph_report();
        py::dict d;
        d["compiled"] = r.compiled;
        d["jit_level"] = r.jit_level;
        d["fusion_level"] = r.fusion_level;
        d["executor"] = r.executor;
        d["compile_ms"] = r.compile_ms;
        d["run_ms"] = r.run_ms;
        d["planned_peak_bytes"] = r.planned_peak_bytes;
        py::list dumps;
        for (const auto& f : r.dump_files) dumps.append(f.string());
        d["dump_files"] = dumps;
        return d;
      });
}

}  // namespace mf::python
