#include "engine/io/model_cell.h"

#include <algorithm>
#include <map>

#include "base/error.h"

namespace mf::engine {

ModelCell::ModelCell(const std::filesystem::path& path, uint64_t seed)
    : Cell("ModelCell"), model_(ModelFile::load(path)), seed_(seed) {
  MF_CHECK(model_.input_names().size() == 1, InvalidArgument, "model ", echo(path.string()),
           " has ", model_.input_names().size(),
           " inputs; a model used as a cell (for gradients or training) takes exactly one");
  const std::string& input = model_.input_parameters().front();
  // Every other parameter is a weight: the file's own values, or (an .ir file) drawn from the seed.
  std::map<std::string, Tensor> values = model_.feeds({});
  if (!model_.dynamic()) {
    const std::map<std::string, Tensor> all = model_.runner().with_generated(values, seed);
    for (const auto& [name, value] : all) values.try_emplace(name, value);
  }
  for (const auto& [name, value] : values) {
    if (name == input) continue;
    std::string cell_name = name;
    std::replace(cell_name.begin(), cell_name.end(), '.', '_');
    register_parameter(cell_name, value, ir::is_floating(value.dtype()));
    names_.emplace_back(cell_name, name);
  }
}

Tensor ModelCell::forward(const Tensor& x) {
  std::map<std::string, Tensor> feeds = model_.feeds({{input_name(), x}});
  // The cell's current parameters, not the file's values: what the tape and a trace follow, and
  // what an optimizer updates.
  std::map<std::string, Tensor> parameters;
  for (auto& [name, value] : named_parameters()) parameters.emplace(name, value);
  for (const auto& [cell_name, ir_name] : names_) feeds[ir_name] = parameters.at(cell_name);
  IrRunner& runner = model_.runner_for(feeds);
  const auto outputs = runner.run_op_by_op(feeds, seed_);
  MF_CHECK(!outputs.empty(), InvalidArgument, "the model has no outputs");
  return outputs.front().second;
}

}  // namespace mf::engine
