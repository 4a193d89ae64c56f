#include "context/graph_kernel_flags.h"

#include <cctype>
#include <charconv>
#include <set>
#include <sstream>
#include <variant>

#include "base/error.h"
#include "context/key_table.h"

namespace mf::context {
namespace {

using BoolField = bool GraphKernelFlags::*;
using IntField = std::optional<int> GraphKernelFlags::*;
using ListField = std::vector<std::string> GraphKernelFlags::*;

struct IntRange {
  IntField field;
  int min;
  int max;
};

// Every flag the parser knows, in the order to_string() writes them.
struct FlagSpec {
  std::string_view name;
  std::variant<BoolField, IntRange, ListField> field;
};

constexpr int kNoMax = 1 << 30;

const FlagSpec kFlags[] = {
    {"opt_level", IntRange{&GraphKernelFlags::opt_level, 0, 3}},
    {"dump_as_text", &GraphKernelFlags::dump_as_text},
    {"enable_expand_ops", &GraphKernelFlags::enable_expand_ops},
    {"enable_expand_ops_only", &GraphKernelFlags::enable_expand_ops_only},
    {"disable_expand_ops", &GraphKernelFlags::disable_expand_ops},
    {"enable_cluster_ops", &GraphKernelFlags::enable_cluster_ops},
    {"enable_cluster_ops_only", &GraphKernelFlags::enable_cluster_ops_only},
    {"disable_cluster_ops", &GraphKernelFlags::disable_cluster_ops},
    {"enable_pass", &GraphKernelFlags::enable_pass},
    {"disable_pass", &GraphKernelFlags::disable_pass},
    {"enable_stitch_fusion", &GraphKernelFlags::enable_stitch_fusion},
    {"enable_recompute_fusion", &GraphKernelFlags::enable_recompute_fusion},
    {"enable_parallel_fusion", &GraphKernelFlags::enable_parallel_fusion},
    {"reduce_fuse_depth", IntRange{&GraphKernelFlags::reduce_fuse_depth, 1, kNoMax}},
    {"composite_op_limit_size", IntRange{&GraphKernelFlags::composite_op_limit_size, 1, kNoMax}},
};

std::string known_flags() {
  std::string out;
  for (const auto& flag : kFlags) {
    if (!out.empty()) out += ", ";
    out += "--";
    out += flag.name;
  }
  return out;
}

std::vector<std::string> split_list(std::string_view token, std::string_view value) {
  MF_CHECK(!value.empty(), InvalidArgument, "graph_kernel_flags: '", token,
           "' needs a comma-separated list of names, for example ", token, "gelu,softmax");
  std::vector<std::string> names;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = value.find(',', start);
    const std::string_view name =
        value.substr(start, comma == std::string_view::npos ? value.npos : comma - start);
    MF_CHECK(!name.empty(), InvalidArgument, "graph_kernel_flags: '", token,
             "' has an empty name in its list; separate names with single commas");
    names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return names;
}

}  // namespace

GraphKernelFlags parse_graph_kernel_flags(std::string_view text) {
  return parse_graph_kernel_flags(text, nullptr);
}

GraphKernelFlags parse_graph_kernel_flags(std::string_view text,
                                          std::vector<std::string>* adjustments) {
  // Where MindSpore warns and goes on, so does this parser (noting what it did in `adjustments`):
  // a token without "--" is ignored, a repeated flag's last value wins, an opt_level above 3 is 3,
  // and a switch also takes 1/0, on/off and any case of true/false.
  const auto note = [&](std::string message) {
    if (adjustments != nullptr) adjustments->push_back("graph_kernel_flags: " + std::move(message));
  };
  GraphKernelFlags flags;
  std::set<std::string, std::less<>> seen;
  std::istringstream in{std::string(text)};
  std::string token;
  while (in >> token) {
    if (token.size() <= 2 || !token.starts_with("--")) {
      note("'" + echo(token, 80) + "' is not a flag (flags look like --opt_level=2); ignored");
      continue;
    }
    const std::size_t eq = token.find('=');
    const std::string name = token.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const bool has_value = eq != std::string::npos;
    const std::string_view value =
        has_value ? std::string_view(token).substr(eq + 1) : std::string_view{};
    const FlagSpec* spec = nullptr;
    for (const auto& flag : kFlags) {
      if (flag.name == name) spec = &flag;
    }
    if (spec == nullptr) {
      flags.unknown.push_back(token);
      continue;
    }
    if (!seen.insert(name).second) {
      note("'--" + name + "' is given more than once; the last value, '" + echo(token, 80) +
           "', wins");
    }
    if (const auto* field = std::get_if<BoolField>(&spec->field)) {
      std::string word(value);
      for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      const bool on = !has_value || word == "true" || word == "1" || word == "on";
      const bool off = word == "false" || word == "0" || word == "off";
      MF_CHECK(on || off, InvalidArgument, "graph_kernel_flags: '", echo(token, 80),
               "' takes no value, or =true / =false (1 / 0, on / off)");
      flags.*(*field) = on;
    } else if (const auto* range = std::get_if<IntRange>(&spec->field)) {
      int number = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
      const bool integer =
          has_value && !value.empty() && ec == std::errc() && end == value.data() + value.size();
      if (integer && number > range->max && range->max != kNoMax) {
        note("'" + echo(token, 80) + "' is above " + std::to_string(range->max) + "; using --" +
             name + "=" + std::to_string(range->max));
        number = range->max;
      }
      const bool ok = integer && number >= range->min && number <= range->max;
      if (!ok && range->max == kNoMax) {
        MF_FAIL(InvalidArgument, "graph_kernel_flags: '", echo(token, 80),
                "' needs an integer >= ", range->min, ", for example --", name, "=",
                range->min + 1);
      }
      MF_CHECK(ok, InvalidArgument, "graph_kernel_flags: '", echo(token, 80),
               "' needs an integer in [", range->min, ", ", range->max, "], for example --", name,
               "=", range->max - 1);
      flags.*(range->field) = number;
    } else {
      MF_CHECK(has_value, InvalidArgument, "graph_kernel_flags: '", echo(token, 80),
               "' needs a comma-separated list of names, for example --", name, "=gelu,softmax");
      flags.*std::get<ListField>(spec->field) = split_list("--" + name + "=", value);
    }
  }
  return flags;
}

std::vector<std::string> unknown_flag_warnings(const GraphKernelFlags& flags) {
  std::vector<std::string> out;
  for (const std::string& token : flags.unknown) {
    const std::string_view name = std::string_view(token).substr(
        2, token.find('=') == std::string::npos ? std::string_view::npos : token.find('=') - 2);
    const FlagSpec* nearest = &kFlags[0];
    for (const auto& flag : kFlags) {
      if (edit_distance(name, flag.name) < edit_distance(name, nearest->name)) nearest = &flag;
    }
    out.push_back("graph_kernel_flags: unknown flag '" + echo(token, 80) +
                  "' is ignored; did you mean '--" + std::string(nearest->name) +
                  "'? (known flags: " + known_flags() + ")");
  }
  return out;
}

std::string to_string(const GraphKernelFlags& flags) {
  std::string out;
  const auto add = [&out](std::string_view piece) {
    if (!out.empty()) out += ' ';
    out += piece;
  };
  for (const auto& flag : kFlags) {
    const std::string prefix = "--" + std::string(flag.name);
    if (const auto* field = std::get_if<BoolField>(&flag.field)) {
      if (flags.*(*field)) add(prefix);
    } else if (const auto* range = std::get_if<IntRange>(&flag.field)) {
      if (const auto& value = flags.*(range->field)) add(prefix + "=" + std::to_string(*value));
    } else {
      const auto& names = flags.*std::get<ListField>(flag.field);
      if (names.empty()) continue;
      std::string joined;
      for (const auto& name : names) joined += (joined.empty() ? "" : ",") + name;
      add(prefix + "=" + joined);
    }
  }
  return out;
}

}  // namespace mf::context
