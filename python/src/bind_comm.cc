// Distributed training for Python under MindSpore's names: mindspore.communication (init,
// get_rank, get_group_size, release) and nn.DistributedGradReducer. The engine does the work
// (engine/distributed/, engine/train/grad_reducer.h); collectives release the GIL while they wait.
#include <pybind11/stl.h>

#include "bindings.h"
#include "engine/distributed/communication.h"
#include "engine/engine_state.h"
#include "engine/train/grad_reducer.h"

namespace mf::python {

void bind_comm(py::module_& m) {
  py::module_ comm = m.def_submodule("communication", "MindSpore's mindspore.communication");
  comm.def(
      "init",
      [](std::optional<std::string> backend_name) {
        py::gil_scoped_release release;
        communication::init(backend_name);
      },
      py::arg("backend_name") = py::none());
  comm.def(
      "get_rank", [](py::object) { return communication::get_rank(); },
      py::arg("group") = py::none());
  comm.def(
      "get_group_size", [](py::object) { return communication::get_group_size(); },
      py::arg("group") = py::none());
  comm.def("release", [] {
    py::gil_scoped_release release;
    communication::release();
  });
  comm.def("_initialized", &communication::initialized);
  comm.def("_backend", &communication::backend);

  py::module_ nn_module = m.attr("nn");
  py::class_<nn::DistributedGradReducer, std::shared_ptr<nn::DistributedGradReducer>>(
      nn_module, "_DistributedGradReducer")
      .def(py::init([](const py::sequence& parameters, bool mean) {
             std::vector<std::string> names;
             std::vector<Tensor> tensors;
             for (size_t i = 0; i < parameters.size(); ++i) {
               py::handle p = parameters[i];
               tensors.push_back(p.cast<Tensor>());
               names.push_back(py::hasattr(p, "name") ? py::str(p.attr("name")).cast<std::string>()
                                                      : "parameter " + std::to_string(i));
             }
             const auto policy = engine::current_policy();
             return std::make_shared<nn::DistributedGradReducer>(
                 std::move(names), std::move(tensors),
                 nn::GradReducerOptions{.mean = mean,
                                        .split_indices = policy->all_reduce_fusion_config.value,
                                        .device_num = policy->device_num.value});
           }),
           py::arg("parameters"), py::arg("mean"))
      .def(
          "__call__",
          [](nn::DistributedGradReducer& self, const std::vector<Tensor>& gradients) {
            py::gil_scoped_release release;
            return self(gradients);
          },
          py::arg("grads"))
      .def("_broadcast_parameters",
           [](nn::DistributedGradReducer& self) {
             py::gil_scoped_release release;
             self.broadcast_parameters();
           })
      .def_property_readonly("_buckets", &nn::DistributedGradReducer::buckets)
      .def_property_readonly("_last_reduce_seconds",
                             &nn::DistributedGradReducer::last_reduce_seconds)
      .def_property_readonly("_last_overlap_seconds",
                             &nn::DistributedGradReducer::last_overlap_seconds);
}

}  // namespace mf::python
