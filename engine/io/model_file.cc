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
    file.prepared_.push_back({{}, std::make_unique<IrRunner>(IrRunner::from_file(path.string()))});
    file.runner_ = file.prepared_.front().runner.get();
    const ir::Graph& graph = file.runner_->graph();
    for (size_t i = 0; i < graph.num_parameters(); ++i) {
      const ir::Parameter& p = *graph.parameter(i);
      if (p.is_weight()) continue;
      file.input_names_.push_back(p.name());
      file.signature_.push_back({p.name(), p.type().dtype, ir::symbolic_shape(p.type().shape)});
    }
    file.input_parameters_ = file.input_names_;
    for (size_t i = 0; i < graph.outputs().size(); ++i) {
      file.output_names_.push_back(graph.output_name(i));
    }
    return file;
  }
  onnx::ImportOptions options;
  file.onnx_ = onnx::parse_onnx_file(path, options);
  file.external_data_dir_ = options.external_data_dir;
  file.signature_ = onnx::onnx_input_signature(*file.onnx_);
  // Before any call, dynamic dimensions bind to 1: the model is imported (and checked) now.
  std::vector<ir::Shape> shapes;
  for (const ir::InputSignature& input : file.signature_) {
    shapes.push_back(ir::concrete_shape(input, {}));
  }
  file.prepare(std::move(shapes));
  if (!file.dynamic()) file.onnx_.reset();  // one import serves every call
  return file;
}

IrRunner& ModelFile::prepare(std::vector<ir::Shape> shapes) {
  for (auto it = prepared_.begin(); it != prepared_.end(); ++it) {
    if (it->shapes != shapes) continue;
    prepared_.splice(prepared_.begin(), prepared_, it);
    runner_ = prepared_.front().runner.get();
    return *runner_;
  }
  MF_CHECK(onnx_ != nullptr, Internal, "no model to import for another input signature");
  onnx::ImportOptions options;
  options.external_data_dir = external_data_dir_;
  for (size_t i = 0; i < signature_.size(); ++i) {
    if (ir::is_dynamic(signature_[i].shape)) options.input_shapes[signature_[i].name] = shapes[i];
  }
  onnx::ImportedModel model = onnx::import_parsed_onnx_model(*onnx_, options);
  // Outputs are reported under the model's own names (output.npy for an output named "output").
  for (size_t i = 0; i < model.onnx_outputs.size() && i < model.graph->outputs().size(); ++i) {
    model.graph->set_output_name(i, onnx::sanitize_name(model.onnx_outputs[i]));
  }
  if (prepared_.empty()) {
    // Names and weights are the same in every import of the file: kept from the first.
    weights_ = std::move(model.weights);
    input_names_ = std::move(model.onnx_inputs);
    input_parameters_ = std::move(model.inputs);
    output_names_ = std::move(model.onnx_outputs);
    opset_ = model.opset;
    producer_ = std::move(model.producer);
  }
  prepared_.push_front({std::move(shapes), std::make_unique<IrRunner>(std::move(model.graph))});
  if (prepared_.size() > kPreparedShapes) prepared_.pop_back();
  runner_ = prepared_.front().runner.get();
  return *runner_;
}

IrRunner& ModelFile::runner_for(const std::map<std::string, Tensor>& feeds) {
  if (!dynamic()) return *runner_;
  ir::SymbolValues symbols;
  for (size_t i = 0; i < signature_.size(); ++i) {
    const auto fed = feeds.find(input_parameters_[i]);
    if (fed != feeds.end()) {
      bind_input(signature_[i], fed->second.dtype(), fed->second.shape(), symbols);
    }
  }
  // A fed input brings its shape (checked above); one left to the seed takes its bound symbols.
  std::vector<ir::Shape> shapes;
  for (size_t i = 0; i < signature_.size(); ++i) {
    const auto fed = feeds.find(input_parameters_[i]);
    shapes.push_back(fed != feeds.end() ? fed->second.shape()
                                        : ir::concrete_shape(signature_[i], symbols));
  }
  return prepare(std::move(shapes));
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
  const std::map<std::string, Tensor> values = feeds(inputs);
  return runner_for(values).run(values, seed);
}

}  // namespace mf::engine
