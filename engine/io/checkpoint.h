#pragma once
// MindSpore's checkpoints (.ckpt): named tensors in MindSpore's protobuf message
// (proto/checkpoint.proto), so a file written here loads in MindSpore's load_checkpoint and one
// MindSpore wrote loads here. A malformed file fails with DataLoss (or InvalidArgument, NotFound,
// Unsupported) naming the file and what was wrong, and is never trusted before it is checked;
// nothing is half-written (a save goes to a temporary file renamed in place). docs/checkpoints.md
// describes the format and what MindSpore does differently.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/nn/cell.h"
#include "engine/tensor.h"

namespace mf::checkpoint {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// MindSpore writes a tensor larger than this as several consecutive entries of one tag, each
// holding the next part of the data (serialization.py's _write_parameter_bytes_data); the save
// does the same, so the file is byte for byte what MindSpore would write.
inline constexpr size_t kChunkBytes = size_t{512} << 20;

// Writes the tensors, in order, waiting for any still being computed. InvalidArgument for an empty
// or repeated name or an undefined tensor; the previous file at `file`, if any, stays intact when
// anything fails.
void save(const std::filesystem::path& file, const NamedTensors& named);
// The cell's named_parameters() ("fc1.weight", ...), as MindSpore's save_checkpoint(net, ...).
void save(const std::filesystem::path& file, const nn::Cell& net);

// The file's tensors in file order. NotFound when it is missing; DataLoss when it is not a
// checkpoint, is truncated or damaged (dims negative or too large, data of the wrong size, a tag
// repeated apart from MindSpore's consecutive parts, a bool byte other than 0/1); Unsupported for a
// MindSpore type modeflow has no dtype for (Float16, Int8, ..., a string, a map tensor).
NamedTensors load(const std::filesystem::path& file);

// What load_param_into_net did not match, in MindSpore's order: net parameters absent from the
// checkpoint (in named_parameters() order) and checkpoint entries the net does not use (in file
// order).
struct LoadReport {
  std::vector<std::string> param_not_load;
  std::vector<std::string> ckpt_not_load;
};

// MindSpore's load_param_into_net: every net parameter whose dotted name is in `params` takes its
// value. A shape that differs is an error (except MindSpore's allowance: the checkpoint's shape is
// the net's with trailing 1s, e.g. (12, 2048, 1, 1) into (12, 2048)). A dtype that differs is
// an error under strict_load; otherwise a float value is cast to a float parameter and an integer
// one to an integer parameter, anything else is an error. Without strict_load, net parameters
// still missing are looked up under a common prefix (MindSpore's _load_dismatch_prefix_params:
// "backbone.fc.weight" in the file for "fc.weight" in the net). Everything is checked before any
// parameter changes: on an error the net is as it was.
LoadReport load_param_into_net(nn::Cell& net, const NamedTensors& params, bool strict_load = false);

// MindSpore's tensor_type string for a dtype ("Float32", "Bool"), and back (nullopt for a string
// that names no modeflow dtype).
std::string_view type_name(DType dtype);
std::optional<DType> dtype_of_type_name(std::string_view name);

}  // namespace mf::checkpoint
