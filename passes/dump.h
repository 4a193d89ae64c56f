#pragma once
// save_graphs dumps: numbered files under DumpOptions::dir, written in order so they sort
// (`0001_trace.ir`, `0002_infer-shapes.ir`, ...), each .ir parseable by ir::parse_graph.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "passes/compile_options.h"

namespace mf::passes {

// Writes the dump files of one compile. Level 0 writes nothing; level 3 adds a Graphviz .dot
// beside each .ir and prints the IR with every detail.
// Promise: the constructor fails (InvalidArgument) before anything runs when the directory cannot
// be created or written; every file written is listed by files() in order.
class Dumper {
 public:
  explicit Dumper(DumpOptions options);

  int level() const { return options_.level; }
  bool enabled(int level) const { return options_.level >= level; }

  // NNNN_<stage>.ir (and at level 3 NNNN_<stage>.dot, plus NNNN_<stage>.<subgraph>.dot for each
  // subgraph). `trailer` is appended as '#' comment lines, so the file still parses.
  void write_graph(const ir::Graph& graph, std::string_view stage, std::string_view trailer = {});
  // NNNN_<stage>.<extension> holding `text`.
  void write_text(std::string_view stage, std::string_view extension, std::string_view text);

  const std::vector<std::filesystem::path>& files() const { return files_; }

 private:
  std::string next_stem(std::string_view stage);
  void write_file(const std::filesystem::path& path, std::string_view text);
  void write_dots(const ir::Graph& graph, const std::string& stem, const std::string& path);

  DumpOptions options_;
  int counter_ = 0;
  std::vector<std::filesystem::path> files_;
};

// debug_level=DEBUG: writes `graph` with every detail to dir/<stem>.ir (creating dir) and returns
// the path; a failure to write is logged and gives an empty path (it must not hide the error).
std::filesystem::path write_failing_graph(const ir::Graph& graph, const std::filesystem::path& dir,
                                          const std::string& stem);

// Every line of `text` as a '#' comment ("# " prepended where a line does not start with '#').
std::string as_ir_comment(std::string_view text);

}  // namespace mf::passes
