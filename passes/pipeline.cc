#include "passes/pipeline.h"

#include <chrono>
#include <exception>
#include <map>

#include "base/error.h"
#include "base/logging.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/profiler.h"

namespace mf::passes {

namespace {

// Node identity across a pass: its graph's path and its id (ids are never reused within a graph).
// The fingerprint names operands by identity too, so erasing a neighbour does not look like a
// rewrite of every later node (positions, which the printer uses, would shift).
using Snapshot = std::map<std::pair<std::string, int64_t>, std::string>;

std::string operand_key(const ir::Value& v) {
  switch (v.kind()) {
    case ir::ValueKind::kParameter:
      return detail::str_cat("p", v.parameter()->index());
    case ir::ValueKind::kConstant:
      return detail::str_cat("c", v.constant()->index());
    case ir::ValueKind::kNode:
      return detail::str_cat("n", v.node()->id(), ".", v.index());
    case ir::ValueKind::kNone:
      break;
  }
  return "?";
}

void take_snapshot(const ir::Graph& graph, const std::string& path, Snapshot& out) {
  for (const ir::Node& node : graph.nodes()) {
    std::string key = node.op() + "(";
    for (const ir::Value& v : node.inputs()) key += operand_key(v) + ",";
    key += "){";
    for (const auto& [name, value] : node.attrs()) {
      key += name + ":" + ir::format_attr_value(value) + ",";
    }
    key += "}";
    out.emplace(std::make_pair(path, node.id()), std::move(key));
  }
  // The graph's outputs and constants, under ids no node has: a pass that only reroutes an output
  // or drops a constant has still changed the graph.
  std::string outputs = "outputs(";
  for (const ir::Value& v : graph.outputs()) outputs += operand_key(v) + ",";
  out.emplace(std::make_pair(path, int64_t{-1}), outputs + ")");
  out.emplace(std::make_pair(path, int64_t{-2}),
              detail::str_cat("constants(", graph.num_constants(), ")"));
  for (const ir::Graph* sub : graph.subgraphs()) take_snapshot(*sub, path + "/" + sub->name(), out);
}

Snapshot snapshot(const ir::Graph& graph) {
  Snapshot out;
  take_snapshot(graph, "", out);
  return out;
}

GraphDelta compare(const Snapshot& before, const Snapshot& after) {
  GraphDelta delta;
  for (const auto& [key, fingerprint] : before) {
    auto it = after.find(key);
    if (key.second < 0) {
      // The outputs' and constants' entries: not nodes.
      delta.outputs_or_constants |= it == after.end() || it->second != fingerprint;
    } else if (it == after.end()) {
      ++delta.removed;
    } else if (it->second != fingerprint) {
      ++delta.rewritten;
    }
  }
  for (const auto& [key, fingerprint] : after) {
    if (key.second < 0) {
      delta.outputs_or_constants |= before.count(key) == 0;
    } else {
      delta.added += before.count(key) == 0;
    }
  }
  return delta;
}

}  // namespace

std::string GraphDelta::summary() const {
  const std::string others = outputs_or_constants ? "outputs or constants changed" : "";
  if (added == 0 && removed == 0 && rewritten == 0) {
    return others.empty() ? "no node change" : "no node change, " + others;
  }
  return detail::str_cat(added, " nodes added, ", removed, " removed, ", rewritten, " rewritten",
                         others.empty() ? "" : ", " + others);
}

void Pipeline::add(std::unique_ptr<Pass> pass) {
  Entry entry;
  entry.passes.push_back(std::move(pass));
  entries_.push_back(std::move(entry));
}

void Pipeline::add_group(std::string group, std::vector<std::unique_ptr<Pass>> passes,
                         int max_rounds) {
  MF_CHECK(max_rounds >= 1, Internal, "group '", group, "' needs at least one round");
  if (passes.empty()) return;
  entries_.push_back(Entry{std::move(group), max_rounds, std::move(passes)});
}

std::vector<PassRecord> Pipeline::run(ir::Graph& graph) {
  std::vector<PassRecord> records;
  for (Entry& entry : entries_) {
    if (entry.group.empty()) {
      for (auto& pass : entry.passes) run_one(*pass, graph, records);
      continue;
    }
    bool converged = false;
    for (int round = 0; round < entry.max_rounds && !converged; ++round) {
      bool changed = false;
      for (auto& pass : entry.passes) changed |= run_one(*pass, graph, records);
      converged = !changed;
    }
    if (!converged) {
      log::warn(
          "pass group '{}' still changed the graph after {} rounds; continuing with the "
          "graph as it is",
          entry.group, entry.max_rounds);
    }
  }
  return records;
}

bool Pipeline::run_one(Pass& pass, ir::Graph& graph, std::vector<PassRecord>& records) {
  if (filter_ && !filter_(pass)) return false;
  const std::string name(pass.name());
  const runtime::SpanTimer span(runtime::ProfileEventKind::kPass, name);
  const Snapshot before = snapshot(graph);
  const auto start = std::chrono::steady_clock::now();
  bool changed = false;
  // debug_level=DEBUG: the graph as the failure left it, written beside the error.
  const auto note_failing_graph = [&](Error& e) {
    if (!failure_writer_) return;
    const std::filesystem::path file = failure_writer_(graph, name);
    if (!file.empty()) e.add_context("the failing graph is in " + file.string());
  };
  try {
    changed = pass.run(graph);
  } catch (Error& e) {
    e.add_context("in pass '" + name + "'");
    note_failing_graph(e);
    throw;
  } catch (const std::exception& e) {
    Error error(ErrorKind::kInternal, e.what());
    error.add_context("in pass '" + name + "'");
    note_failing_graph(error);
    throw error;
  }
  const double millis =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (changed || verify_every_pass_) {
    try {
      ir::verify(graph);
    } catch (Error& e) {
      e.add_context("graph verification failed after pass '" + name + "'" +
                    (changed ? "" : " (which reported no change)"));
      note_failing_graph(e);
      throw;
    }
  }
  const GraphDelta delta = compare(before, snapshot(graph));
  // A pass that says "unchanged" is trusted: nothing verifies the graph after it, and a fixed-point
  // group stops on it. Saying so after a rewrite is a bug in the pass, caught here.
  if (!changed && !delta.empty()) {
    Error error(ErrorKind::kInternal,
                detail::str_cat("pass '", name, "' reported no change but changed the graph (",
                                delta.summary(), ")"));
    note_failing_graph(error);
    throw error;
  }
  PassRecord record{name, changed, millis, changed ? delta.summary() : "no change"};
  log::debug("pass {}: {} in {:.3f} ms", name, record.summary, millis);
  records.push_back(record);
  if (observer_) observer_(graph, records.back());
  return changed;
}

}  // namespace mf::passes
