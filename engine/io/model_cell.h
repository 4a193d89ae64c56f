#pragma once
// A network read from a file (.onnx, .ir) as a Cell, called with the model's inputs in the file's
// order (a model of several takes them as one call of several inputs): the model's weights are the
// cell's parameters (named as the file names them, '.' written '_'), so gradients (mf::grad, the
// tape, `mf grad MODEL.onnx`) and training see them. forward() runs the model's ops through the
// dispatcher: op by op, a tape records them; in GRAPH mode the cell's trace follows them into one
// graph, differentiated and compiled like any cell's.

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/io/model_file.h"
#include "engine/nn/cell.h"

namespace mf::engine {

class ModelCell : public nn::Cell {
 public:
  // InvalidArgument for a model without inputs. Weights the file does not hold (an .ir file's
  // parameters besides its inputs) are drawn from `seed`, as `mf run` draws them.
  explicit ModelCell(const std::filesystem::path& path, uint64_t seed = 0);
  Tensor forward(const Tensor& x) override;

  // The first input as the file names it.
  const std::string& input_name() const { return model_.input_names().front(); }
  const ModelFile& model() const { return model_; }
  ModelFile& model() { return model_; }
  // Each parameter of the cell and the model's name for it.
  const std::vector<std::pair<std::string, std::string>>& weight_names() const { return names_; }

 private:
  ModelFile model_;
  uint64_t seed_;
  std::vector<std::pair<std::string, std::string>> names_;  // (cell parameter, IR parameter)
};

}  // namespace mf::engine
