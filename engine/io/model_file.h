#pragma once
// A network read from a file, ready to run in either mode: a `.ir` text file or a `.onnx` model.
// The one place that turns a file into an IrRunner, for `mf run`, `mf dump`, `mf bisect` and
// Python's `modeflow.onnx.load`: an ONNX model runs with its exporter's weights, and its inputs
// and outputs keep the names the file gives them.
//
// An ONNX model with dynamic dimensions (dim_param, or no dim_value) is parsed once and imported
// once per concrete input signature: each run binds the symbols from its inputs (a contradiction
// is an error naming the input and the axis), and each signature's graph, compiled form and
// kernels are kept, the most recent kPreparedShapes of them.

#include <cstdint>
#include <filesystem>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/eager/ir_runner.h"
#include "engine/tensor.h"
#include "ir/input_signature.h"

namespace mf::onnx {
struct ParsedModel;
}

namespace mf::engine {

enum class ModelFormat { kIr, kOnnx };

// The format a path names by its extension (".ir", ".onnx"), or nothing for any other.
std::optional<ModelFormat> model_format(const std::filesystem::path& path);

class ModelFile {
 public:
  // Reads and checks the file; InvalidArgument for an extension other than .ir or .onnx.
  static ModelFile load(const std::filesystem::path& path);

  // The values to run with: the file's own weights, then `inputs` by the file's input names (an
  // ONNX name, or the IR parameter's name). InvalidArgument for a name the model does not have.
  std::map<std::string, Tensor> feeds(const std::map<std::string, Tensor>& inputs) const;

  // feeds(inputs), run; parameters still unfed are filled from the seed (IrRunner's rule).
  std::vector<std::pair<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs,
                                                  uint64_t seed);

  // The runner of the inputs' concrete signature, made (imported) on first use: `feeds` are
  // feeds() of the call's inputs. The one runner of a static model.
  IrRunner& runner_for(const std::map<std::string, Tensor>& feeds);
  // The runner the last call ran (or, before any, the first prepared one).
  IrRunner& runner();
  const IrRunner& runner() const;

  // The inputs as the file declares them (by the file's names), dynamic dimensions as symbols.
  const std::vector<ir::InputSignature>& signature() const { return signature_; }
  bool dynamic() const { return ir::is_dynamic(signature_); }
  // Concrete signatures prepared and held (1 for a static model), and how many are kept.
  size_t prepared_shapes() const { return prepared_.size(); }
  static constexpr size_t kPreparedShapes = size_t(context::kDynamicFormsKept);
  // GRAPH mode, dynamic model: whether one symbolic compile serves every size under the current
  // settings, or why each size compiles ("" before the first compile).
  const std::string& dynamic_note() const;
  // The last symbolic compile: its signature and each size written as an expression of the
  // symbols ("" when there is none).
  std::string symbolic_description() const;
  ModelFormat format() const { return format_; }
  // The inputs as the file names them, in order, and the IR parameter each one feeds.
  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& input_parameters() const { return input_parameters_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  int64_t opset() const { return opset_; }                   // ONNX only; 0 for .ir
  const std::string& producer() const { return producer_; }  // "pytorch 2.1", when the file says

 private:
  ModelFile() = default;

  // One runner per concrete input signature (the shapes of the dynamic inputs), most recent first.
  struct Prepared {
    std::vector<ir::Shape> shapes;
    std::unique_ptr<IrRunner> runner;
  };
  IrRunner& prepare(std::vector<ir::Shape> shapes);
  // What every import and the symbolic compiles of a dynamic model share (held by its runners'
  // compile hooks, so it outlives a move of the ModelFile).
  struct Dynamic;
  std::shared_ptr<Dynamic> dynamic_state_;

  ModelFormat format_ = ModelFormat::kIr;
  std::list<Prepared> prepared_;
  IrRunner* runner_ = nullptr;
  std::vector<ir::InputSignature> signature_;
  bool imported_ = false;  // weights and names come from the first import
  std::string load_note_;
  std::map<std::string, Tensor> weights_;
  std::vector<std::string> input_names_, input_parameters_, output_names_;
  int64_t opset_ = 0;
  std::string producer_;
};

}  // namespace mf::engine
