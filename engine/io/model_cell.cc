#include "engine/io/model_cell.h"

#include <algorithm>
#include <map>

#include "base/error.h"

namespace mf::engine {

ModelCell::ModelCell(const std::filesystem::path& path, uint64_t seed)
    : Cell("ModelCell"), model_(ModelFile::load(path)), seed_(seed) {
  MF_CHECK(!model_.input_names().empty(), InvalidArgument, "model ", echo(path.string()),
           " has no inputs; a model used as a cell (for gradients or training) takes one or more");
  const std::vector<std::string>& inputs = model_.input_parameters();
  // Every other parameter is a weight: the file's own values, or (an .ir file) drawn from the seed.
  std::map<std::string, Tensor> values = model_.feeds({});
  if (!model_.dynamic()) {
    const std::map<std::string, Tensor> all = model_.runner().with_generated(values, seed);
    for (const auto& [name, value] : all) values.try_emplace(name, value);
  }
  for (const auto& [name, value] : values) {
    if (std::find(inputs.begin(), inputs.end(), name) != inputs.end()) continue;
    std::string cell_name = name;
    std::replace(cell_name.begin(), cell_name.end(), '.', '_');
    register_parameter(cell_name, value, ir::is_floating(value.dtype()));
    names_.emplace_back(cell_name, name);
  }
}

Tensor ModelCell::forward(const Tensor& x) {
  const std::vector<std::string>& names = model_.input_names();
  if (extra_inputs().size() + 1 != names.size()) {
    std::string listed;
    for (const std::string& name : names) listed += (listed.empty() ? "" : ", ") + echo(name, 64);
    MF_FAIL(InvalidArgument, "the model takes ", names.size(), " inputs (", listed,
            "), in this order; the call gave ", extra_inputs().size() + 1);
  }
  std::map<std::string, Tensor> given{{names[0], x}};
  for (size_t i = 1; i < names.size(); ++i) given[names[i]] = extra_input(i - 1);
  std::map<std::string, Tensor> feeds = model_.feeds(given);
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
