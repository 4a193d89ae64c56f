// MindSpore's checkpoint functions: save_checkpoint, load_checkpoint and load_param_into_net, with
// MindSpore's signatures and argument checks, over engine/io/checkpoint.h.
#include <pybind11/stl.h>

#include "bindings.h"
#include "engine/io/checkpoint.h"
#include "engine/nn/cell.h"

namespace mf::python {
namespace {

std::string type_name_of(py::handle value) {
  return py::str(py::type::of(value).attr("__name__")).cast<std::string>();
}

nn::Cell& cell_arg(py::handle value, const char* function, const char* argument) {
  if (!py::isinstance<nn::Cell>(value)) {
    throw py::type_error(std::string("For '") + function + "', the argument '" + argument +
                         "' should be a Cell, but got " + type_name_of(value) + ".");
  }
  return value.cast<nn::Cell&>();
}

Tensor tensor_arg(py::handle value, const std::string& name) {
  if (!py::isinstance<Tensor>(value)) {
    throw py::type_error("For 'save_checkpoint', the data of '" + name +
                         "' should be a Parameter or Tensor, but got " + type_name_of(value) + ".");
  }
  return value.cast<Tensor>();
}

// save_obj as MindSpore takes it: a Cell (its parameters), a list of Parameters (their names) or of
// {"name": str, "data": Tensor} dicts, or a dict name -> Parameter (what load_checkpoint returns).
checkpoint::NamedTensors named_tensors(py::handle save_obj) {
  if (py::isinstance<nn::Cell>(save_obj)) {
    return cell_arg(save_obj, "save_checkpoint", "save_obj").named_parameters();
  }
  checkpoint::NamedTensors named;
  if (py::isinstance<py::dict>(save_obj)) {
    for (auto [key, value] : save_obj.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key)) {
        throw py::type_error(
            "For 'save_checkpoint', when save_obj is a dict, its keys should be "
            "str, but got " +
            type_name_of(key) + ".");
      }
      const auto name = key.cast<std::string>();
      named.emplace_back(name, tensor_arg(value, name));
    }
    return named;
  }
  if (!py::isinstance<py::list>(save_obj)) {
    throw py::type_error(
        "For 'save_checkpoint', the parameter 'save_obj' must be nn.Cell, list or dict, but got " +
        type_name_of(save_obj) + ".");
  }
  for (py::handle item : save_obj.cast<py::list>()) {
    if (py::isinstance<Parameter>(item)) {
      const auto& parameter = item.cast<const Parameter&>();
      named.emplace_back(parameter.name, parameter);
    } else if (py::isinstance<py::dict>(item)) {
      const auto entry = item.cast<py::dict>();
      if (!entry.contains("name") || !entry.contains("data") ||
          !py::isinstance<py::str>(entry["name"])) {
        throw py::type_error(
            "For 'save_checkpoint', each dict of save_obj needs a str 'name' and "
            "a 'data' Tensor, like {\"name\": \"fc.weight\", \"data\": tensor}.");
      }
      const auto name = entry["name"].cast<std::string>();
      named.emplace_back(name, tensor_arg(entry["data"], name));
    } else {
      throw py::type_error(
          "For 'save_checkpoint', the items of save_obj should be Parameters or "
          "dicts {\"name\": ..., \"data\": ...}, but got " +
          type_name_of(item) + ".");
    }
  }
  return named;
}

std::string file_name_arg(py::handle value, const char* function) {
  if (!py::isinstance<py::str>(value)) {
    throw py::type_error(std::string("For '") + function +
                         "', the argument 'ckpt_file_name' must be string, but got " +
                         type_name_of(value) + ".");
  }
  return value.cast<std::string>();
}

py::tuple load_into(nn::Cell& net, const checkpoint::NamedTensors& params, bool strict_load) {
  checkpoint::LoadReport report;
  {
    py::gil_scoped_release release;  // a parameter may still be being computed
    report = checkpoint::load_param_into_net(net, params, strict_load);
  }
  flush_warnings();
  return py::make_tuple(py::cast(report.param_not_load), py::cast(report.ckpt_not_load));
}

}  // namespace

void bind_checkpoint(py::module_& m) {
  m.def(
      "save_checkpoint",
      [](py::handle save_obj, py::handle ckpt_file_name) {
        std::string file = file_name_arg(ckpt_file_name, "save_checkpoint");
        // MindSpore appends the suffix (_check_save_obj_and_ckpt_file_name).
        if (!file.ends_with(".ckpt")) file += ".ckpt";
        const checkpoint::NamedTensors named = named_tensors(save_obj);
        py::gil_scoped_release release;  // waits for pending tensors, then writes
        checkpoint::save(file, named);
      },
      py::arg("save_obj"), py::arg("ckpt_file_name"),
      "MindSpore's save_checkpoint: the parameters of a Cell, a list of Parameters or of "
      "{'name': str, 'data': Tensor} dicts, or a dict name -> Parameter, written as a MindSpore "
      ".ckpt file ('.ckpt' is appended to a name without it).");

  m.def(
      "load_checkpoint",
      [](py::handle ckpt_file_name, py::object net, bool strict_load) {
        const std::string file = file_name_arg(ckpt_file_name, "load_checkpoint");
        if (!file.ends_with(".ckpt")) {
          throw py::value_error(
              "For 'load_checkpoint', the checkpoint file should end with "
              "'.ckpt', please input the correct 'ckpt_file_name'.");
        }
        checkpoint::NamedTensors loaded;
        try {
          py::gil_scoped_release release;
          loaded = checkpoint::load(file);
        } catch (const Error& error) {
          // MindSpore raises ValueError for every checkpoint it cannot load.
          throw py::value_error(error.what());
        }
        py::dict out;
        for (auto& [name, tensor] : loaded) out[py::str(name)] = Parameter(tensor, name, true);
        if (!net.is_none()) {
          load_into(cell_arg(net, "load_checkpoint", "net"), loaded, strict_load);
        }
        return out;
      },
      py::arg("ckpt_file_name"), py::arg("net") = py::none(), py::arg("strict_load") = false,
      "MindSpore's load_checkpoint: a dict name -> Parameter of the file's tensors, in file "
      "order; given a net, they are also loaded into it (load_param_into_net).");

  m.def(
      "load_param_into_net",
      [](py::handle net, py::handle parameter_dict, bool strict_load) {
        nn::Cell& cell = cell_arg(net, "load_param_into_net", "net");
        if (!py::isinstance<py::dict>(parameter_dict)) {
          throw py::type_error(
              "For 'load_param_into_net', the argument 'parameter_dict' should "
              "be a dict, but got " +
              type_name_of(parameter_dict) + ".");
        }
        checkpoint::NamedTensors params;
        for (auto [key, value] : parameter_dict.cast<py::dict>()) {
          if (!py::isinstance<py::str>(key) || !py::isinstance<Tensor>(value)) {
            throw py::type_error(
                "For 'parameter_dict', the element in the argument "
                "'parameter_dict' should be a 'str' and 'Parameter', but got " +
                type_name_of(key) + " and " + type_name_of(value) + ".");
          }
          params.emplace_back(key.cast<std::string>(), value.cast<Tensor>());
        }
        return load_into(cell, params, strict_load);
      },
      py::arg("net"), py::arg("parameter_dict"), py::arg("strict_load") = false,
      "MindSpore's load_param_into_net: sets each parameter of net found in parameter_dict; "
      "returns (param_not_load, ckpt_not_load).");
}

}  // namespace mf::python
