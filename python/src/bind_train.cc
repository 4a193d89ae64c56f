// Training for Python under MindSpore's names: the losses (nn.SoftmaxCrossEntropyWithLogits, ...;
// nn.LossBase to subclass with construct(logits, labels)), the optimizers over a list of
// Parameters or of group dicts, the learning-rate functions, nn.WithLossCell and
// nn.TrainOneStepCell. The engine does the work (engine/train/); this file converts arguments.
#include <pybind11/stl.h>

#include "bindings.h"
#include "engine/train/learning_rate.h"
#include "engine/train/loss.h"
#include "engine/train/optimizer.h"
#include "engine/train/train_cells.h"

namespace mf::python {
namespace {

// A loss written in Python: construct(logits, labels) of a LossBase subclass.
class PyLoss : public nn::Loss {
 public:
  Tensor operator()(const Tensor& logits, const Tensor& labels) override {
    py::gil_scoped_acquire gil;
    py::function construct = py::get_override(static_cast<const nn::Loss*>(this), "construct");
    if (!construct) throw py::type_error(name() + " defines no construct(self, logits, labels)");
    py::object result = construct(logits, labels);
    if (!py::isinstance<Tensor>(result)) {
      throw py::type_error(name() + ".construct must return a Tensor");
    }
    return result.cast<Tensor>();
  }
  std::string name() const override {
    py::gil_scoped_acquire gil;
    const py::detail::type_info* type = py::detail::get_type_info(typeid(nn::Loss));
    const py::handle self = py::detail::get_object_handle(static_cast<const nn::Loss*>(this), type);
    return self ? py::str(py::type::of(self).attr("__name__")).cast<std::string>() : "LossBase";
  }
};

nn::Reduction reduction_of(const std::string& text, std::string_view loss) {
  return nn::parse_reduction(text, loss);
}

Tensor optional_tensor(py::handle value) {
  return value.is_none() ? Tensor() : to_tensor(value);
}

// A learning rate: a number, a list of per-step numbers, or a 1-D Tensor of them.
nn::LearningRate learning_rate_of(py::handle value) {
  if (py::isinstance<py::bool_>(value)) {
    throw py::type_error("learning_rate must be a float, a list of floats or a 1-D Tensor");
  }
  if (py::isinstance<py::float_>(value) || py::isinstance<py::int_>(value)) {
    return nn::LearningRate(value.cast<double>());
  }
  if (py::isinstance<Tensor>(value)) {
    const Tensor t = value.cast<Tensor>();
    if (t.shape().empty()) return nn::LearningRate(t.to_doubles().at(0));
    if (t.shape().size() != 1) {
      throw py::value_error("learning_rate as a Tensor must be a scalar or 1-D, got shape " +
                            ir::shape_to_string(t.shape()));
    }
    return nn::LearningRate(t.to_doubles());
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    return nn::LearningRate(value.cast<std::vector<double>>());
  }
  throw py::type_error("learning_rate must be a float, a list of floats or a 1-D Tensor, got " +
                       py::str(py::type::of(value).attr("__name__")).cast<std::string>());
}

nn::NamedTensors named_params(py::handle params, size_t& unnamed) {
  nn::NamedTensors out;
  for (py::handle p : params) {
    if (!py::isinstance<Tensor>(p)) {
      throw py::type_error(
          "an optimizer's parameters are Parameters (net.trainable_params()), got " +
          py::str(py::type::of(p).attr("__name__")).cast<std::string>());
    }
    std::string name;
    if (py::isinstance<Parameter>(p)) name = p.cast<const Parameter&>().name;
    if (name.empty()) name = "Parameter" + std::to_string(unnamed++);
    out.emplace_back(name, p.cast<Tensor>());
  }
  return out;
}

// MindSpore's params argument: Parameters, or dicts {'params': [...], 'lr': ..., 'weight_decay':
// ...} (one group each; 'order_params' is accepted and ignored: the order is the groups').
std::vector<nn::ParamGroup> groups_of(py::handle params) {
  if (!py::isinstance<py::list>(params) && !py::isinstance<py::tuple>(params)) {
    throw py::type_error("params must be a list of Parameters or of group dicts");
  }
  py::list items = py::list(py::reinterpret_borrow<py::object>(params));
  if (items.empty()) throw py::value_error("params is empty: give net.trainable_params()");
  size_t unnamed = 0;
  std::vector<nn::ParamGroup> groups;
  if (!py::isinstance<py::dict>(items[0])) {
    groups.push_back({named_params(items, unnamed), {}, {}});
    return groups;
  }
  for (py::handle item : items) {
    if (!py::isinstance<py::dict>(item)) {
      throw py::type_error("params mixes group dicts and other values; give one kind");
    }
    py::dict group = py::reinterpret_borrow<py::dict>(item);
    if (group.contains("order_params")) continue;
    if (!group.contains("params")) throw py::value_error("a parameter group needs a 'params' key");
    nn::ParamGroup g;
    g.params = named_params(group["params"], unnamed);
    if (group.contains("lr")) g.learning_rate = learning_rate_of(group["lr"]);
    if (group.contains("weight_decay")) g.weight_decay = group["weight_decay"].cast<double>();
    for (auto [key, value] : group) {
      const std::string k = py::str(key).cast<std::string>();
      if (k != "params" && k != "lr" && k != "weight_decay" && k != "grad_centralization") {
        throw py::value_error("a parameter group takes 'params', 'lr' and 'weight_decay', got '" +
                              echo(k) + "'");
      }
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

void check_loss_scale(double loss_scale) {
  if (!(loss_scale > 0)) {
    throw py::value_error("loss_scale must be greater than 0, but got " +
                          std::to_string(loss_scale));
  }
}

void check_decay(double weight_decay) {
  if (!(weight_decay >= 0)) {
    throw py::value_error("weight_decay must be at least 0, but got " +
                          std::to_string(weight_decay));
  }
}

py::list named_list(const nn::NamedTensors& named) {
  py::list out;
  for (const auto& [name, t] : named) out.append(Parameter(t, name, false));
  return out;
}

}  // namespace

void bind_train(py::module_& m) {
  py::module_ nn_module = m.attr("nn");

  py::class_<nn::Loss, PyLoss, std::shared_ptr<nn::Loss>>(
      nn_module, "LossBase", "MindSpore's LossBase: subclass it with construct(logits, labels).")
      .def(py::init<>())
      .def(
          "__call__",
          [](nn::Loss& self, const Tensor& logits, const Tensor& labels) {
            py::gil_scoped_release release;
            return self(logits, labels);
          },
          py::arg("logits"), py::arg("labels"))
      .def_property_readonly("cls_name", &nn::Loss::name);

  py::class_<nn::SoftmaxCrossEntropyWithLogits, nn::Loss,
             std::shared_ptr<nn::SoftmaxCrossEntropyWithLogits>>(nn_module,
                                                                 "SoftmaxCrossEntropyWithLogits")
      .def(py::init([](bool sparse, const std::string& reduction) {
             return std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
                 sparse, reduction_of(reduction, "SoftmaxCrossEntropyWithLogits"));
           }),
           py::arg("sparse") = false, py::arg("reduction") = "none");
  py::class_<nn::CrossEntropyLoss, nn::Loss, std::shared_ptr<nn::CrossEntropyLoss>>(
      nn_module, "CrossEntropyLoss")
      .def(py::init([](py::object weight, int64_t ignore_index, const std::string& reduction,
                       double label_smoothing) {
             return std::make_shared<nn::CrossEntropyLoss>(nn::CrossEntropyOptions{
                 optional_tensor(weight), ignore_index, reduction_of(reduction, "CrossEntropyLoss"),
                 label_smoothing});
           }),
           py::arg("weight") = py::none(), py::arg("ignore_index") = -100,
           py::arg("reduction") = "mean", py::arg("label_smoothing") = 0.0);
  py::class_<nn::MSELoss, nn::Loss, std::shared_ptr<nn::MSELoss>>(nn_module, "MSELoss")
      .def(py::init([](const std::string& reduction) {
             return std::make_shared<nn::MSELoss>(reduction_of(reduction, "MSELoss"));
           }),
           py::arg("reduction") = "mean");
  py::class_<nn::L1Loss, nn::Loss, std::shared_ptr<nn::L1Loss>>(nn_module, "L1Loss")
      .def(py::init([](const std::string& reduction) {
             return std::make_shared<nn::L1Loss>(reduction_of(reduction, "L1Loss"));
           }),
           py::arg("reduction") = "mean");
  py::class_<nn::BCEWithLogitsLoss, nn::Loss, std::shared_ptr<nn::BCEWithLogitsLoss>>(
      nn_module, "BCEWithLogitsLoss")
      .def(py::init([](const std::string& reduction, py::object weight, py::object pos_weight) {
             return std::make_shared<nn::BCEWithLogitsLoss>(
                 reduction_of(reduction, "BCEWithLogitsLoss"), optional_tensor(weight),
                 optional_tensor(pos_weight));
           }),
           py::arg("reduction") = "mean", py::arg("weight") = py::none(),
           py::arg("pos_weight") = py::none());

  py::class_<nn::Optimizer, std::shared_ptr<nn::Optimizer>>(
      nn_module, "Optimizer", "An optimizer: call it with the gradients to update in place.")
      .def(
          "__call__",
          [](nn::Optimizer& self, const std::vector<Tensor>& gradients) {
            for (const Tensor& g : gradients) {
              if (is_traced(g)) {
                throw_traced_value_error(
                    "the optimizer",
                    "its update, which runs on the host between compiled steps, cannot be part "
                    "of the trace. For one compiled training step use "
                    "nn.TrainOneStepCell(nn.WithLossCell(net, loss_fn), optimizer); a jit "
                    "function that calls the optimizer runs op by op (fullgraph=False).");
              }
            }
            py::gil_scoped_release release;
            self.step(gradients);
            return true;
          },
          py::arg("gradients"))
      .def_property_readonly("parameters",
                             [](const nn::Optimizer& self) {
                               nn::NamedTensors named;
                               for (size_t i = 0; i < self.parameters().size(); ++i) {
                                 named.emplace_back(self.parameter_names()[i],
                                                    self.parameters()[i]);
                               }
                               return named_list(named);
                             })
      .def(
          "state", [](const nn::Optimizer& self) { return named_list(self.named_state()); },
          "The optimizer's state (moments, global_step) as named Parameters, for checkpoints.")
      .def_property_readonly("global_step", &nn::Optimizer::global_step)
      .def("get_lr", [](const nn::Optimizer& self) { return self.current_learning_rate(0); });

  py::class_<nn::SGD, nn::Optimizer, std::shared_ptr<nn::SGD>>(nn_module, "SGD")
      .def(py::init([](py::object params, py::object learning_rate, double momentum,
                       double dampening, double weight_decay, bool nesterov, double loss_scale) {
             check_loss_scale(loss_scale);
             check_decay(weight_decay);
             return std::make_shared<nn::SGD>(
                 groups_of(params), nn::SGDOptions{learning_rate_of(learning_rate), momentum,
                                                   dampening, weight_decay, nesterov, loss_scale});
           }),
           py::arg("params"), py::arg("learning_rate") = 0.1, py::arg("momentum") = 0.0,
           py::arg("dampening") = 0.0, py::arg("weight_decay") = 0.0, py::arg("nesterov") = false,
           py::arg("loss_scale") = 1.0);
  py::class_<nn::Momentum, nn::Optimizer, std::shared_ptr<nn::Momentum>>(nn_module, "Momentum")
      .def(py::init([](py::object params, py::object learning_rate, double momentum,
                       double weight_decay, double loss_scale, bool use_nesterov) {
             check_loss_scale(loss_scale);
             check_decay(weight_decay);
             return std::make_shared<nn::Momentum>(
                 groups_of(params), nn::MomentumOptions{learning_rate_of(learning_rate), momentum,
                                                        weight_decay, loss_scale, use_nesterov});
           }),
           py::arg("params"), py::arg("learning_rate"), py::arg("momentum"),
           py::arg("weight_decay") = 0.0, py::arg("loss_scale") = 1.0,
           py::arg("use_nesterov") = false);
  py::class_<nn::Adam, nn::Optimizer, std::shared_ptr<nn::Adam>>(nn_module, "Adam")
      .def(py::init([](py::object params, py::object learning_rate, double beta1, double beta2,
                       double eps, bool use_locking, bool use_nesterov, double weight_decay,
                       double loss_scale) {
             (void)use_locking;  // one thread updates: nothing to lock
             check_loss_scale(loss_scale);
             check_decay(weight_decay);
             return std::make_shared<nn::Adam>(
                 groups_of(params), nn::AdamOptions{learning_rate_of(learning_rate), beta1, beta2,
                                                    eps, weight_decay, loss_scale, use_nesterov});
           }),
           py::arg("params"), py::arg("learning_rate") = 1e-3, py::arg("beta1") = 0.9,
           py::arg("beta2") = 0.999, py::arg("eps") = 1e-8, py::arg("use_locking") = false,
           py::arg("use_nesterov") = false, py::arg("weight_decay") = 0.0,
           py::arg("loss_scale") = 1.0);
  py::class_<nn::AdamWeightDecay, nn::Optimizer, std::shared_ptr<nn::AdamWeightDecay>>(
      nn_module, "AdamWeightDecay")
      .def(py::init([](py::object params, py::object learning_rate, double beta1, double beta2,
                       double eps, double weight_decay) {
             check_decay(weight_decay);
             return std::make_shared<nn::AdamWeightDecay>(
                 groups_of(params), nn::AdamWeightDecayOptions{learning_rate_of(learning_rate),
                                                               beta1, beta2, eps, weight_decay});
           }),
           py::arg("params"), py::arg("learning_rate") = 1e-3, py::arg("beta1") = 0.9,
           py::arg("beta2") = 0.999, py::arg("eps") = 1e-6, py::arg("weight_decay") = 0.0);

  nn_module.def("exponential_decay_lr", &nn::exponential_decay_lr, py::arg("learning_rate"),
                py::arg("decay_rate"), py::arg("total_step"), py::arg("step_per_epoch"),
                py::arg("decay_epoch"), py::arg("is_stair") = false);
  nn_module.def("cosine_decay_lr", &nn::cosine_decay_lr, py::arg("min_lr"), py::arg("max_lr"),
                py::arg("total_step"), py::arg("step_per_epoch"), py::arg("decay_epoch"));
  nn_module.def("piecewise_constant_lr", &nn::piecewise_constant_lr, py::arg("milestone"),
                py::arg("learning_rates"));

  py::class_<nn::WithLossCell, nn::Cell, std::shared_ptr<nn::WithLossCell>>(nn_module,
                                                                            "_WithLossCell")
      // A Python subclass (a Cell, a LossBase) lives in its Python object: keep both alive.
      .def(py::init<std::shared_ptr<nn::Cell>, std::shared_ptr<nn::Loss>>(), py::arg("backbone"),
           py::arg("loss_fn"), py::keep_alive<1, 2>(), py::keep_alive<1, 3>())
      .def(
          "__call__",
          [](nn::WithLossCell& self, const Tensor& data, const Tensor& label) {
            py::gil_scoped_release release;
            return self(data, label);
          },
          py::arg("data"), py::arg("label"))
      .def_property_readonly("backbone_network", [](nn::WithLossCell& self) {
        return py::cast(&self.backbone(), py::return_value_policy::reference);
      });

  py::class_<nn::TrainOneStepCell, std::shared_ptr<nn::TrainOneStepCell>>(nn_module,
                                                                          "_TrainOneStepCell")
      .def(py::init<std::shared_ptr<nn::WithLossCell>, std::shared_ptr<nn::Optimizer>, double>(),
           py::arg("network"), py::arg("optimizer"), py::arg("sens") = 1.0, py::keep_alive<1, 2>())
      .def(
          "__call__",
          [](nn::TrainOneStepCell& self, const Tensor& data, const Tensor& label) {
            py::gil_scoped_release release;
            return self(data, label);
          },
          py::arg("data"), py::arg("label"))
      // Data parallel: seconds in all-reduce in the last step, and how many of them the backward
      // hid; None outside data parallelism.
      .def_property_readonly("_reduce_seconds", [](const nn::TrainOneStepCell& self) -> py::object {
        const nn::DistributedGradReducer* reducer = self.grad_reducer();
        if (reducer == nullptr) return py::none();
        return py::make_tuple(reducer->last_reduce_seconds(), reducer->last_overlap_seconds());
      });
}

}  // namespace mf::python
