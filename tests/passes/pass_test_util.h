#pragma once
// Helpers for pass tests written as IR text in, IR text out. Types may be spelled short:
// `f32(2, 3)` is `<Tensor[Float32], (2, 3)>` (also f64, i32, i64, bool).

#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>
#include <string_view>

#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass.h"

namespace mf::passes::testing {

inline std::string expand(std::string_view text) {
  static const std::regex short_type(R"(\b(f32|f64|i32|i64|bool)\(([^)]*)\))");
  std::string out;
  std::string rest(text);
  std::smatch m;
  while (std::regex_search(rest, m, short_type)) {
    static const std::pair<const char*, const char*> kNames[] = {{"f32", "Float32"},
                                                                 {"f64", "Float64"},
                                                                 {"i32", "Int32"},
                                                                 {"i64", "Int64"},
                                                                 {"bool", "Bool"}};
    std::string dtype;
    for (const auto& [s, l] : kNames) {
      if (m[1] == s) dtype = l;
    }
    out += m.prefix().str() + "<Tensor[" + dtype + "], (" + m[2].str() + ")>";
    rest = m.suffix().str();
  }
  out += rest;
  // Leading newline of a raw string literal.
  if (!out.empty() && out.front() == '\n') out.erase(0, 1);
  return out;
}

inline std::unique_ptr<ir::Graph> parse(std::string_view text) {
  auto graph = ir::parse_graph(expand(text), "test.ir");
  ir::verify(*graph);
  return graph;
}

// The printed graph without the two header lines and the blank line after them.
inline std::string body(const ir::Graph& graph) {
  std::string text = ir::print_graph(graph);
  for (int i = 0; i < 3; ++i) text.erase(0, text.find('\n') + 1);
  return text;
}

struct PassResult {
  bool changed = false;
  std::string text;
};

// Parses `text`, runs the pass, verifies the result and prints it.
inline PassResult run_pass(Pass& pass, std::string_view text) {
  auto graph = parse(text);
  PassResult result;
  result.changed = pass.run(*graph);
  ir::verify(*graph);
  result.text = body(*graph);
  return result;
}

}  // namespace mf::passes::testing
