#pragma once
// ONNX import: an ONNX ModelProto (opsets 1 to 18 of the default domain) becomes an ir::Graph that
// runs op by op or compiled like any other. Initializers become weight parameters whose values come
// with the import; graph inputs become plain parameters; Constant nodes and everything computable
// from constants alone (Shape on static shapes, Gather on constants, ...) fold into ir constants.
// Each converter reads its op as the model's opset defines it (Clip's bounds are attributes before
// 11, ReduceMean's axes an input from 18, ...): within the range, the opset never refuses a model.
//
// Never trusts the file: damaged bytes are DataLoss, an inconsistent graph (cycles, undefined
// inputs, bad attributes) is InvalidArgument, and what is valid ONNX but beyond this importer
// (an op, a domain, an opset, a dtype, a dynamic dimension) is Unsupported with what to do.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tensor.h"
#include "ir/graph.h"
#include "ir/input_signature.h"

namespace mf::onnx {

// The lowest and highest opset of the default domain ("" / "ai.onnx") the importer reads. Nodes of
// opsets 1-6 are rewritten into their opset-7 form first (legacy_opsets.cc says what changed);
// above 18 the converters have not been checked against the op changes (19: AveragePool's
// dilations, Cast's saturate, ...).
inline constexpr int64_t kMinOpset = 1;
inline constexpr int64_t kMaxOpset = 18;

// One imported model: the graph plus what is needed to run it with the exporter's weights.
// Feed `weights` (and values for `inputs`) to engine::IrRunner::run by parameter name.
struct ImportedModel {
  std::unique_ptr<ir::Graph> graph;
  std::map<std::string, Tensor> weights;  // IR parameter name -> initializer value
  std::vector<std::string> inputs;        // IR parameter names of the ONNX graph inputs, in order
  std::vector<std::string> onnx_inputs;   // the same inputs by their ONNX names
  std::vector<std::string> onnx_outputs;  // ONNX names of the graph outputs ("output0", ... order)
  // The graph inputs as the file declares them, by ONNX name: a dim_param is a named symbol, a
  // dimension with neither value nor name an unnamed one.
  std::vector<ir::InputSignature> signature;
  int64_t opset = 0;
  std::string producer;  // "pytorch 2.1", when the file says
};

// What an import may be told beyond the file.
struct ImportOptions {
  // Graph inputs (by ONNX name) frozen to these values: they become constants, so inputs that
  // carry shapes or axes (Reshape's shape, Slice's starts) fold as if they were initializers.
  std::map<std::string, Tensor> frozen_inputs;
  // Values of graph inputs (by ONNX name) the importer may read where an op needs a constant
  // (Resize's scales, CumSum's axis, Range's bounds): the graph is then specialized to them. The
  // inputs stay inputs, fed as usual, wherever they are read as data.
  std::map<std::string, Tensor> input_values;
  // The folder that initializers stored as external data are read from (their locations are
  // relative to it, and may not leave it). import_onnx_model sets it to the model's folder; empty,
  // external data is refused.
  std::filesystem::path external_data_dir;
  // Shapes for graph inputs (by ONNX name) with dynamic dimensions: the graph is imported for
  // this binding. A dynamic input without one is Unsupported; a shape that contradicts the
  // declaration (rank, a known dimension, a symbol two inputs disagree on) is InvalidArgument.
  std::map<std::string, ir::Shape> input_shapes;
  // false: weight parameters get their types only, and ImportedModel::weights stays empty (a
  // caller that already holds them imports the model again at other sizes).
  bool read_weights = true;
};

// A parsed model, kept by a caller that imports it once per binding of its dynamic dimensions.
struct ParsedModel;
std::shared_ptr<const ParsedModel> parse_onnx_model(std::string_view bytes,
                                                    std::string_view source);
// The graph inputs' declarations (ImportedModel::signature) without importing, and when
// `parameters` is given the IR parameter each becomes (ImportedModel::inputs).
std::vector<ir::InputSignature> onnx_input_signature(
    const ParsedModel& model, std::vector<std::string>* parameters = nullptr);
ImportedModel import_parsed_onnx_model(const ParsedModel& model, const ImportOptions& options);

// Reads and imports a .onnx file. `source` names the model in error messages.
ImportedModel import_onnx_model(const std::filesystem::path& file, ImportOptions options = {});
// Reads a .onnx file for parse_onnx_model (the model's folder is its external data folder).
std::shared_ptr<const ParsedModel> parse_onnx_file(const std::filesystem::path& file,
                                                   ImportOptions& options);
ImportedModel import_onnx_model_from_bytes(std::string_view bytes,
                                           std::string_view source = "<memory>",
                                           const ImportOptions& options = {});

// The graph alone: weights stay unset, so a runner fills them from its seed (for `mf dump`).
std::unique_ptr<ir::Graph> import_onnx(const std::filesystem::path& file);
std::unique_ptr<ir::Graph> import_onnx_from_bytes(std::string_view bytes,
                                                  std::string_view source = "<memory>");

// An ONNX value name as an IR name: characters outside [A-Za-z0-9_.] become '_', "" becomes "_".
std::string sanitize_name(std::string_view onnx_name);

// Reads a serialized TensorProto (a test_data_set_N/input_K.pb of ONNX's backend tests).
// `name` receives the tensor's name when not null.
Tensor read_tensor_proto(const std::filesystem::path& file, std::string* name = nullptr);

}  // namespace mf::onnx

namespace mf::engine {
using onnx::import_onnx;
using onnx::import_onnx_model;
}  // namespace mf::engine
