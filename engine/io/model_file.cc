#include "engine/io/model_file.h"

#include "base/error.h"
#include "engine/io/onnx/importer.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace mf::engine {

std::optional<ModelFormat> model_format(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".ir") return ModelFormat::kIr;
  if (ext == ".onnx") return ModelFormat::kOnnx;
  return std::nullopt;
}

ModelFile ModelFile::load(const std::filesystem::path& path) {
  MF_CHECK(path.native().find('\0') == std::string::npos, InvalidArgument, "the path '",
           echo(path.native()), "' contains a NUL byte; name the file without one");
  const std::optional<ModelFormat> format = model_format(path);
  MF_CHECK(format.has_value(), InvalidArgument, "'", echo(path.string()),
           "' is neither an .ir nor an .onnx file: name the file with its format's extension");
  ModelFile file;
  file.format_ = *format;
  if (*format == ModelFormat::kIr) {
    file.runner_ = std::make_unique<IrRunner>(IrRunner::from_file(path.string()));
    const ir::Graph& graph = file.runner_->graph();
    for (size_t i = 0; i < graph.num_parameters(); ++i) {
      if (graph.parameter(i)->is_weight()) continue;
      file.input_names_.push_back(graph.parameter(i)->name());
    }
    file.input_parameters_ = file.input_names_;
    for (size_t i = 0; i < graph.outputs().size(); ++i) {
      file.output_names_.push_back(graph.output_name(i));
    }
    return file;
  }
  onnx::ImportedModel model = onnx::import_onnx_model(path);
  // Outputs are reported under the model's own names (output.npy for an output named "output").
  for (size_t i = 0; i < model.onnx_outputs.size() && i < model.graph->outputs().size(); ++i) {
    model.graph->set_output_name(i, onnx::sanitize_name(model.onnx_outputs[i]));
  }
  file.runner_ = std::make_unique<IrRunner>(std::move(model.graph));
  file.weights_ = std::move(model.weights);
  file.input_names_ = std::move(model.onnx_inputs);
  file.input_parameters_ = std::move(model.inputs);
  file.output_names_ = std::move(model.onnx_outputs);
  file.opset_ = model.opset;
  file.producer_ = std::move(model.producer);
  return file;
}

std::map<std::string, Tensor> ModelFile::feeds(const std::map<std::string, Tensor>& inputs) const {
  std::map<std::string, Tensor> values = weights_;
  for (const auto& [name, tensor] : inputs) {
    std::string parameter;
    for (size_t i = 0; i < input_names_.size(); ++i) {
      if (input_names_[i] == name || input_parameters_[i] == name) parameter = input_parameters_[i];
    }
    // Any other parameter of the graph may be fed too (a weight of an .ir file).
    if (parameter.empty() && runner_->graph().find_parameter(name) != nullptr) parameter = name;
    if (parameter.empty()) {
      std::string known;
      for (const std::string& n : input_names_) known += (known.empty() ? "" : ", ") + n;
      MF_FAIL(InvalidArgument, "the model has no input '", echo(name),
              "'; its inputs: ", known.empty() ? "none" : known);
    }
    values[parameter] = tensor;
  }
  return values;
}

std::vector<std::pair<std::string, Tensor>> ModelFile::run(
    const std::map<std::string, Tensor>& inputs, uint64_t seed) {
  return runner_->run(feeds(inputs), seed);
}

}  // namespace mf::engine
