// `mf context list | get | explain`: the key tables, one value, and the Policy with its reasons.
// Every subcommand accepts the global options, applied to the context before it runs.

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

#include "base/error.h"
#include "context/context.h"
#include "context/fingerprint.h"
#include "context/key_table.h"
#include "context/policy.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

using context::Json;
using context::KeySpec;

std::string shown(const Json& value) {
  return value.is_null() ? "(not set)" : value.dump();
}

Json key_json(const KeySpec& spec, const std::string& prefix, const Json& current) {
  Json out = {{"name", prefix + spec.name},
              {"type", context::type_name(spec)},
              {"default", spec.default_value},
              {"current", current},
              {"allowed", context::allowed_values(spec)},
              {"devices", context::device_names(spec.devices)},
              {"effective_on_cpu", spec.effective_on_cpu},
              {"compile_relevant", spec.compile_relevant},
              {"doc", spec.doc},
              {"on_cpu", spec.on_cpu}};
  if (!spec.deprecated.empty()) out["deprecated"] = spec.deprecated;
  if (!spec.alias_of.empty()) out["alias_of"] = spec.alias_of;
  if (!spec.sub_keys.empty()) {
    out["sub_keys"] = Json::array();
    for (const auto& sub : spec.sub_keys) {
      out["sub_keys"].push_back(
          key_json(sub, prefix + spec.name + ".",
                   current.is_object() ? current.value(sub.name, Json()) : Json()));
    }
  }
  return out;
}

// Every key of the three tables with its current value, as `list --json` prints it.
Json all_keys(const context::Snapshot& snapshot) {
  Json out = Json::array();
  const auto add = [&](const std::vector<KeySpec>& table, const std::string& prefix,
                       const Json& values) {
    for (const auto& spec : table) {
      const Json& current = values.at(spec.alias_of.empty() ? spec.name : spec.alias_of);
      out.push_back(key_json(spec, prefix, current));
    }
  };
  add(context::context_keys(), "", snapshot.values());
  add(context::auto_parallel_keys(), "auto_parallel_context.", snapshot.auto_parallel());
  add(context::ps_keys(), "ps_context.", snapshot.ps());
  return out;
}

// A cell of the table: dicts are summarized, their sub-keys get rows of their own.
std::string cell(const Json& value) {
  return value.is_object() ? "{...}" : shown(value);
}

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

// One section per context: a header row, then per key a row of columns and its doc line below.
void print_table(const Json& keys) {
  const std::string sections[] = {"", "auto_parallel_context.", "ps_context."};
  for (const std::string& section : sections) {
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> docs;
    const auto add_row = [&](const Json& key, const std::string& indent) {
      std::string name = key["name"].get<std::string>().substr(section.size());
      if (!indent.empty()) name = indent + name.substr(name.find('.'));
      std::string devices = key["devices"];
      if (!key["effective_on_cpu"].get<bool>()) devices += " (no effect on CPU)";
      rows.push_back(
          {name, key["type"], cell(key["default"]), cell(key["current"]), devices, key["allowed"]});
      std::string doc = key["doc"];
      if (key.contains("deprecated")) doc += " [deprecated]";
      if (key.contains("on_cpu") && !key["on_cpu"].get<std::string>().empty()) {
        doc += "\n    here: " + key["on_cpu"].get<std::string>();
      }
      docs.push_back(doc);
    };
    for (const auto& key : keys) {
      const std::string name = key["name"];
      const bool nested =
          name.starts_with("auto_parallel_context.") || name.starts_with("ps_context.");
      if (section.empty() ? nested : !name.starts_with(section)) continue;
      add_row(key, "");
      for (const auto& sub : key.value("sub_keys", Json::array())) add_row(sub, "  ");
    }
    const std::vector<std::string> header = {"KEY",     "TYPE",    "DEFAULT",
                                             "CURRENT", "DEVICES", "ALLOWED"};
    std::vector<std::size_t> width(header.size());
    for (std::size_t c = 0; c < header.size(); ++c) {
      width[c] = header[c].size();
      for (const auto& row : rows)
        width[c] = std::max(width[c], std::min<std::size_t>(row[c].size(), 40));
    }
    const auto print_row = [&](const std::vector<std::string>& row) {
      std::string line;
      for (std::size_t c = 0; c < row.size(); ++c) {
        line += c + 1 == row.size() ? row[c] : pad(row[c], width[c]) + "  ";
      }
      std::cout << line << "\n";
    };
    std::cout << (section.empty() ? std::string("set_context")
                                  : section.substr(0, section.size() - 1))
              << "\n";
    print_row(header);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      print_row(rows[r]);
      std::cout << "    " << docs[r] << "\n";
    }
    std::cout << "\n";
  }
}

void print_explanations(const std::vector<context::Explanation>& lines,
                        const context::Fingerprint& print) {
  std::size_t name_width = 0;
  std::size_t value_width = 0;
  for (const auto& line : lines) {
    name_width = std::max(name_width, line.name.size());
    value_width = std::max(value_width, std::min<std::size_t>(line.value.size(), 24));
  }
  // Values and reasons quote what the user set: escaped, so a control byte never reaches the
  // terminal, and a value is cut (a reason is the engine's own words around it).
  for (const auto& line : lines) {
    std::string name = line.name;
    name.resize(name_width, ' ');
    std::string value = line.value.empty() ? "(none)" : echo(line.value);
    if (value.size() < value_width) value.resize(value_width, ' ');
    std::cout << name << "  " << value << "  " << echo(line.reason, 2000) << "\n";
  }
  std::cout << "fingerprint " << print.hex() << " (" << print.components.size()
            << " compile-relevant components)\n";
}

}  // namespace

void add_context_command(CLI::App& app, GlobalOptions& options) {
  CLI::App* command = app.add_subcommand("context", "Show the context: keys, values and decisions");
  command->require_subcommand(1);
  add_global_options(*command, options);

  auto json = std::make_shared<bool>(false);
  CLI::App* list = command->add_subcommand("list",
                                           "Every key: type, default, current value, allowed "
                                           "values, devices, doc");
  add_global_options(*list, options);
  list->add_flag("--json", *json, "Print JSON instead of a table");
  list->callback([&options, json] {
    apply_global_options(options);
    const Json keys = all_keys(context::snapshot());
    if (*json) {
      std::cout << keys.dump(2) << "\n";
    } else {
      print_table(keys);
    }
  });

  auto key = std::make_shared<std::string>();
  CLI::App* get =
      command->add_subcommand("get", "Print one value (dotted sub-keys: jit_config.jit_level)");
  add_global_options(*get, options);
  get->add_option("KEY", *key, "The key")->required();
  get->callback([&options, key] {
    apply_global_options(options);
    const Json value = context::get(*key);
    std::cout << echo(value.is_string() ? value.get<std::string>() : value.dump(), 100000) << "\n";
  });

  auto explain_json = std::make_shared<bool>(false);
  auto jit = std::make_shared<std::string>();
  CLI::App* explain = command->add_subcommand("explain",
                                              "Every decision the context implies, with "
                                              "its reason");
  add_global_options(*explain, options);
  explain->add_flag("--json", *explain_json, "Print JSON instead of text");
  explain
      ->add_option("--network-jit-level", *jit,
                   "A network's own JitConfig level, which beats jit_config.jit_level")
      ->check(CLI::IsMember({"O0", "O1", "O2"}));
  explain->callback([&options, explain_json, jit] {
    apply_global_options(options);
    const context::Snapshot snapshot = context::snapshot();
    std::optional<context::JitLevel> network;
    if (!jit->empty()) network = context::parse_jit_level(*jit);
    const context::Policy policy = context::derive_policy(snapshot, network);
    const auto lines = context::explain(policy);
    const context::Fingerprint print = context::fingerprint(snapshot, policy);
    if (!*explain_json) {
      print_explanations(lines, print);
      return;
    }
    Json out = {{"decisions", Json::array()}, {"fingerprint", print.hex()}};
    for (const auto& line : lines) {
      out["decisions"].push_back(
          {{"name", line.name}, {"value", line.value}, {"reason", line.reason}});
    }
    std::cout << out.dump(2) << "\n";
  });
}

}  // namespace mf::tools
