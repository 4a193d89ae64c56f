#pragma once
// print_file_path: what `print` writes when the context names a file, and how `mf print-parse`
// reads it back. The format is ours (proto/print.proto): a header, then length-delimited records,
// appended as they come, so a crash loses at most the record being written.

#include <filesystem>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace mf::engine {

struct PrintedTensor {
  std::string prefix;
  Tensor tensor;
};

// Reads every record of a print file; DataLoss naming the file and record number on damage.
std::vector<PrintedTensor> read_print_file(const std::filesystem::path& file);

// Routes the print op to `path` (empty: back to the screen). As MindSpore documents, when the file
// already exists the output goes to a new file named with a timestamp suffix; returns the file
// used.
std::filesystem::path route_print_output(const std::string& path);
// Routes only when `path` differs from the last requested destination (the engine calls this
// whenever the context changes; an unchanged print_file_path keeps its open file).
void ensure_print_output(const std::string& path);

}  // namespace mf::engine
