#include "engine/io/model_file.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "base/error.h"
#include "base/file_reader.h"
#include "engine/io/onnx/importer.h"
#include "ir/parser.h"
#include "ir/symbolic_graph.h"
#include "ir/verifier.h"

namespace mf::engine {

// The parsed model, imported once per signature, and its symbolic compiles.
struct ModelFile::Dynamic {
  // The model read (imported or parsed) at a binding of its inputs' shapes; the weights are read
  // only when asked (by the first import).
  std::function<onnx::ImportedModel(const std::vector<ir::Shape>& shapes, bool read_weights)>
      source;
  std::vector<ir::InputSignature> signature;
  std::vector<std::string> input_parameters;  // the IR parameter of each input
  // One symbolic compile per compile fingerprint.
  std::vector<std::pair<context::Fingerprint, SymbolicCompile>> compiles;
  std::string note;

  // The model imported at `shapes`; the weights are read only by the first import.
  onnx::ImportedModel import_at(const std::vector<ir::Shape>& shapes, bool read_weights) const;
  // The compiled form of `runner` (imported at `shapes`) bound from the symbolic compile of these
  // settings, which is made on first use; null when the model does not generalize (the runner
  // then compiles its own size).
  std::unique_ptr<CompiledNetwork> bind(const IrRunner& runner,
                                        const std::vector<ir::Shape>& shapes,
                                        const context::Policy& policy,
                                        const context::Fingerprint& fingerprint,
                                        const DriverOptions& options, GraphRunReport& report);
};

onnx::ImportedModel ModelFile::Dynamic::import_at(const std::vector<ir::Shape>& shapes,
                                                  bool read_weights) const {
  return source(shapes, read_weights);
}

namespace {

// An ONNX model imported at `shapes` (one per graph input); outputs keep the model's names.
onnx::ImportedModel import_onnx_at(const onnx::ParsedModel& model,
                                   const std::filesystem::path& external_data_dir,
                                   const std::vector<ir::InputSignature>& signature,
                                   const std::vector<ir::Shape>& shapes, bool read_weights) {
  onnx::ImportOptions options;
  options.external_data_dir = external_data_dir;
  options.read_weights = read_weights;
  for (size_t i = 0; i < signature.size(); ++i) {
    if (ir::is_dynamic(signature[i].shape)) options.input_shapes[signature[i].name] = shapes[i];
  }
  onnx::ImportedModel imported = onnx::import_parsed_onnx_model(model, options);
  // Outputs are reported under the model's own names (output.npy for an output named "output").
  for (size_t i = 0; i < imported.onnx_outputs.size() && i < imported.graph->outputs().size();
       ++i) {
    imported.graph->set_output_name(i, onnx::sanitize_name(imported.onnx_outputs[i]));
  }
  return imported;
}

// An .ir file's text parsed at `shapes` (one per input of the entry graph), as a model: its
// inputs are the entry graph's parameters that are not weights.
onnx::ImportedModel parse_ir_at(const std::string& text, const std::string& filename,
                                const std::vector<ir::InputSignature>& signature,
                                const std::vector<ir::Shape>& shapes) {
  ir::ParseBinding binding;
  for (size_t i = 0; i < signature.size() && i < shapes.size(); ++i) {
    binding.input_shapes[signature[i].name] = shapes[i];
  }
  onnx::ImportedModel model;
  model.graph = ir::parse_graph(text, filename, binding);
  ir::verify(*model.graph);
  for (size_t i = 0; i < model.graph->num_parameters(); ++i) {
    const ir::Parameter& p = *model.graph->parameter(i);
    if (p.is_weight()) continue;
    model.inputs.push_back(p.name());
    model.onnx_inputs.push_back(p.name());
  }
  for (size_t i = 0; i < model.graph->outputs().size(); ++i) {
    model.onnx_outputs.push_back(model.graph->output_name(i));
  }
  return model;
}

}  // namespace

std::unique_ptr<CompiledNetwork> ModelFile::Dynamic::bind(
    const IrRunner& runner, const std::vector<ir::Shape>& shapes, const context::Policy& policy,
    const context::Fingerprint& fingerprint, const DriverOptions& options, GraphRunReport& report) {
  if (!policy.symbolic_compile.value) {
    note = "compiled per size: " + policy.symbolic_compile.reason;
    report.dynamic_note = note;
    return nullptr;
  }
  auto entry = std::find_if(compiles.begin(), compiles.end(),
                            [&](const auto& c) { return c.first == fingerprint; });
  if (entry == compiles.end()) {
    std::vector<size_t> parameters;
    for (const std::string& name : input_parameters) {
      parameters.push_back(runner.graph().find_parameter(name)->index());
    }
    const ir::ProbePlan plan = ir::plan_probe(signature, shapes);
    compiles.emplace_back(
        fingerprint,
        compile_symbolic(
            runner.graph().clone(), [&] { return import_at(plan.probe_shapes, false).graph; }, plan,
            std::move(parameters), policy, fingerprint, options));
    entry = std::prev(compiles.end());
    report.compiled = true;  // the one symbolic compile (or the finding that there is none)
  }
  const SymbolicCompile& symbolic = entry->second;
  if (!symbolic.usable()) {
    note = "compiled per size: " + symbolic.why_not;
    report.dynamic_note = note;
    return nullptr;
  }
  std::unique_ptr<CompiledNetwork> network =
      bind_symbolic(symbolic, shapes, policy, fingerprint, options);
  if (report.compiled) {
    network->compiled.dump_files = symbolic.dump_files;
    network->compile_ms += symbolic.compile_ms;
  }
  note = "one compile serves every size";
  report.dynamic_note = note;
  report.specialized = true;
  return network;
}

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
  auto state = std::make_shared<Dynamic>();
  if (*format == ModelFormat::kIr) {
    // Parsed once to read the inputs' declarations; a file with symbolic dimensions is parsed
    // again at each signature.
    const std::string text = read_regular_file(path, kMaxTextFileBytes, "IR file");
    ir::ParseBinding binding;
    binding.signature = &state->signature;
    try {
      ir::parse_graph(text, path.string(), binding);
    } catch (const Error&) {
      // Sizes of 1 may be ones the graph does not allow: a file with dynamic inputs is parsed at
      // each call's sizes (and its errors reported then); any other error is the file's.
      if (!ir::is_dynamic(state->signature)) throw;
    }
    state->source = [text, filename = path.string(), signature = state->signature](
                        const std::vector<ir::Shape>& shapes, bool) {
      return parse_ir_at(text, filename, signature, shapes);
    };
    for (const ir::InputSignature& input : state->signature) {
      state->input_parameters.push_back(input.name);
    }
  } else {
    onnx::ImportOptions options;
    std::shared_ptr<const onnx::ParsedModel> parsed = onnx::parse_onnx_file(path, options);
    state->signature = onnx::onnx_input_signature(*parsed, &state->input_parameters);
    state->source = [parsed, dir = options.external_data_dir, signature = state->signature](
                        const std::vector<ir::Shape>& shapes, bool read_weights) {
      return import_onnx_at(*parsed, dir, signature, shapes, read_weights);
    };
  }
  file.signature_ = state->signature;
  for (const ir::InputSignature& input : file.signature_) file.input_names_.push_back(input.name);
  file.input_parameters_ = state->input_parameters;
  file.dynamic_state_ = std::move(state);
  std::vector<ir::Shape> shapes;
  for (const ir::InputSignature& input : file.signature_) {
    shapes.push_back(ir::concrete_shape(input, {}));
  }
  if (!file.dynamic()) {
    file.prepare(std::move(shapes));
    file.dynamic_state_.reset();  // one import serves every call
    return file;
  }
  // Dynamic dimensions bind to 1 until a call brings sizes: the model is imported (and checked)
  // now when it allows them; one that does not is imported at its first call's sizes.
  try {
    file.prepare(std::move(shapes));
  } catch (const Error& e) {
    file.load_note_ = "not imported at every dynamic dimension 1 (" + e.message() +
                      "); each call imports at its sizes";
  }
  return file;
}

const std::string& ModelFile::dynamic_note() const {
  static const std::string none;
  return dynamic_state_ ? dynamic_state_->note : none;
}

std::string ModelFile::symbolic_description() const {
  if (!dynamic_state_) return {};
  for (auto it = dynamic_state_->compiles.rbegin(); it != dynamic_state_->compiles.rend(); ++it) {
    if (it->second.graph) return it->second.graph->describe();
    if (!it->second.text.empty()) {
      // Loaded from the compile cache: the text's header says the same.
      std::string header;
      size_t pos = 0;
      while (it->second.text.compare(pos, 2, "# ") == 0 &&
             it->second.text.compare(pos, 11, "# IR entry:") != 0) {
        const size_t end = it->second.text.find('\n', pos);
        if (end == std::string::npos) break;
        header += it->second.text.substr(pos + 2, end + 1 - pos - 2);
        pos = end + 1;
      }
      return header;
    }
  }
  return {};
}

IrRunner& ModelFile::prepare(std::vector<ir::Shape> shapes) {
  for (auto it = prepared_.begin(); it != prepared_.end(); ++it) {
    if (it->shapes != shapes) continue;
    prepared_.splice(prepared_.begin(), prepared_, it);
    runner_ = prepared_.front().runner.get();
    return *runner_;
  }
  MF_CHECK(dynamic_state_ != nullptr, Internal, "no model to import for another signature");
  onnx::ImportedModel model = dynamic_state_->import_at(shapes, !imported_);
  if (!imported_) {
    // Names and weights are the same in every import of the file: kept from the first.
    imported_ = true;
    weights_ = std::move(model.weights);
    input_names_ = std::move(model.onnx_inputs);
    input_parameters_ = std::move(model.inputs);
    output_names_ = std::move(model.onnx_outputs);
    opset_ = model.opset;
    producer_ = std::move(model.producer);
  }
  auto runner = std::make_unique<IrRunner>(std::move(model.graph));
  if (dynamic()) {
    runner->set_compile_hook([state = dynamic_state_, shapes, runner = runner.get()](
                                 const context::Policy& policy,
                                 const context::Fingerprint& fingerprint,
                                 const DriverOptions& options, GraphRunReport& report) {
      return state->bind(*runner, shapes, policy, fingerprint, options, report);
    });
  }
  prepared_.push_front({std::move(shapes), std::move(runner)});
  if (prepared_.size() > kPreparedShapes) prepared_.pop_back();
  runner_ = prepared_.front().runner.get();
  return *runner_;
}

IrRunner& ModelFile::runner() {
  MF_CHECK(runner_ != nullptr, InvalidArgument,
           "the model is not imported yet: its dynamic dimensions do not all allow 1; run it with "
           "inputs first (",
           load_note_, ")");
  return *runner_;
}

const IrRunner& ModelFile::runner() const {
  return const_cast<ModelFile*>(this)->runner();
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
    if (parameter.empty() && runner_ != nullptr && runner_->graph().find_parameter(name) != nullptr)
      parameter = name;
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
  IrRunner& runner = runner_for(feeds(inputs));
  return runner.run(feeds(inputs), seed);  // with the weights of a first import just made
}

}  // namespace mf::engine
