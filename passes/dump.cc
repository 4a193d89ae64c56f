#include "passes/dump.h"

#include <cstdio>
#include <fstream>
#include <system_error>

#include "base/error.h"
#include "base/file_reader.h"
#include "base/logging.h"
#include "ir/dot.h"
#include "ir/printer.h"

namespace mf::passes {

Dumper::Dumper(DumpOptions options) : options_(std::move(options)) {
  MF_CHECK(options_.level >= 0 && options_.level <= 3, InvalidArgument, "save_graphs level ",
           options_.level, " is out of range; use 0 (off) to 3");
  if (options_.level == 0) return;
  MF_CHECK(!options_.dir.empty(), InvalidArgument,
           "save_graphs is on but no dump directory is set; set save_graphs_path");
  std::error_code ec;
  std::filesystem::create_directories(options_.dir, ec);
  MF_CHECK(!ec && std::filesystem::is_directory(options_.dir), InvalidArgument,
           "cannot create the graph dump directory '", options_.dir.string(),
           "' (save_graphs_path): ", ec ? ec.message() : "it exists and is not a directory",
           "; choose a writable directory or set save_graphs=0");
  // Creating is not writing: a read-only directory is found here, not after compiling.
  const std::filesystem::path probe = options_.dir / ".mf_write_probe";
  {
    std::ofstream out(probe);
    MF_CHECK(out && (out << "ok") && out.flush(), InvalidArgument,
             "cannot write in the graph dump directory '", options_.dir.string(),
             "' (save_graphs_path); choose a writable directory or set save_graphs=0");
  }
  std::filesystem::remove(probe, ec);
}

std::string Dumper::next_stem(std::string_view stage) {
  char number[16];
  std::snprintf(number, sizeof(number), "%04d", ++counter_);
  std::string stem = options_.prefix.empty() ? "" : options_.prefix + "_";
  return stem + number + "_" + std::string(stage);
}

void Dumper::write_file(const std::filesystem::path& path, std::string_view text) {
  // Atomic: a reader (or a crash) never sees half a dump; a full disk is an error.
  write_file_atomically(path, text, "graph dump");
  files_.push_back(path);
}

void Dumper::write_graph(const ir::Graph& graph, std::string_view stage, std::string_view trailer) {
  if (options_.level == 0) return;
  const std::string stem = next_stem(stage);
  const ir::Detail detail =
      options_.level >= 3 || options_.full_detail ? ir::Detail::kFull : ir::Detail::kNormal;
  std::string text = ir::print_graph(graph, {detail});
  if (!trailer.empty()) {
    text += '\n';
    text += as_ir_comment(trailer);
  }
  write_file(options_.dir / (stem + ".ir"), text);
  if (options_.level >= 3) write_dots(graph, stem, "");
}

void Dumper::write_dots(const ir::Graph& graph, const std::string& stem, const std::string& path) {
  const std::filesystem::path file = options_.dir / (stem + path + ".dot");
  ir::write_dot_file(graph, file.string());
  files_.push_back(file);
  for (const ir::Graph* sub : graph.subgraphs()) write_dots(*sub, stem, path + "." + sub->name());
}

void Dumper::write_text(std::string_view stage, std::string_view extension, std::string_view text) {
  if (options_.level == 0) return;
  write_file(options_.dir / (next_stem(stage) + "." + std::string(extension)), text);
}

std::filesystem::path write_failing_graph(const ir::Graph& graph, const std::filesystem::path& dir,
                                          const std::string& stem) {
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::filesystem::path file = dir / (stem + ".ir");
    write_file_atomically(file, ir::print_graph(graph, {ir::Detail::kFull}), "failing graph");
    return file;
  } catch (const Error& e) {
    log::warn("debug_level=DEBUG: could not write the failing graph: {}", e.message());
    return {};
  }
}

std::string as_ir_comment(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    out += line.starts_with('#') ? "" : "# ";
    out += line;
    out += '\n';
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return out;
}

}  // namespace mf::passes
