#include "context/value_parsing.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "context/graph_kernel_flags.h"
#include "context/json_file.h"

namespace mf::context {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string shown(const KeySpec& spec, std::string_view path) {
  return path.empty() ? spec.name : std::string(path);
}

[[noreturn]] void fail_value(std::string_view api, const KeySpec& spec, std::string_view path,
                             const Json& value, std::string_view allowed) {
  MF_FAIL(InvalidArgument, "For '", api, "', the value of '", shown(spec, path), "' must be ",
          allowed, ", but got ", echo(describe(value)), ".");
}

[[noreturn]] void fail_text(std::string_view api, std::string_view name, std::string_view allowed,
                            std::string_view text) {
  MF_FAIL(InvalidArgument, "For '", api, "', the value of '", name, "' must be ", allowed,
          ", but got '", echo(text), "'.");
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t number = 0;
  const char* first = text.data();
  if (!text.empty() && text.front() == '+') ++first;
  const auto [end, ec] = std::from_chars(first, text.data() + text.size(), number);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return number;
}

// "an integer in [0, 2147483647]": the range an int key accepts, its maximum INT_MAX when the key
// declares none.
std::string kint_range(const KeySpec& spec) {
  return detail::str_cat("an integer in [", spec.min.value_or(std::numeric_limits<int>::min()),
                         ", ", spec.max.value_or(std::numeric_limits<int>::max()), "]");
}

Json normalize_int(std::string_view api, const KeySpec& spec, std::string_view path,
                   const Json& value) {
  const std::string allowed =
      spec.min && spec.max ? "an integer in " + allowed_values(spec) : allowed_values(spec);
  if (!value.is_number_integer()) fail_value(api, spec, path, value, allowed);
  // Unsigned JSON numbers above INT64_MAX are not int64 values; nlohmann would wrap them.
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())) {
    fail_value(api, spec, path, value, kint_range(spec));
  }
  const std::int64_t number = value.get<std::int64_t>();
  if ((spec.min && number < *spec.min) || (spec.max && number > *spec.max)) {
    fail_value(api, spec, path, value, allowed);
  }
  // Every int key is read as a C++ int: a key without a declared maximum is bounded by INT_MAX,
  // so INT64_MAX is a range error rather than silently narrowed to -1.
  if (!spec.max && number > std::numeric_limits<int>::max()) {
    fail_value(api, spec, path, value, kint_range(spec));
  }
  return number;
}

Json normalize_choice(std::string_view api, const KeySpec& spec, std::string_view path,
                      const Json& value) {
  std::string allowed = "one of [" + allowed_values(spec) + "]";
  if (spec.choice_by_index) {
    allowed += " or its integer 0 to " + std::to_string(spec.choices.size() - 1);
    if (value.is_number_integer()) {
      const auto index = value.get<std::int64_t>();
      if (index >= 0 && index < static_cast<std::int64_t>(spec.choices.size())) {
        return spec.choices[static_cast<size_t>(index)];
      }
    }
  }
  if (!value.is_string()) fail_value(api, spec, path, value, allowed);
  const std::string& text = value.get_ref<const std::string&>();
  // The default may lie outside the choices ("" = not set); setting it back is always allowed.
  if (spec.default_value.is_string() && text == spec.default_value.get<std::string>()) return text;
  for (const auto& choice : spec.choices) {
    if (choice == text || (spec.ignore_case && lower(choice) == lower(text))) return choice;
  }
  fail_value(api, spec, path, value, allowed);
}

Json normalize_dict(std::string_view api, const KeySpec& spec, std::string_view path,
                    const Json& value) {
  if (!value.is_object()) fail_value(api, spec, path, value, "a dict with " + allowed_values(spec));
  // A dict replaces the previous one, as in MindSpore; sub-keys not given take their defaults.
  Json out = spec.default_value.is_object() ? spec.default_value : Json::object();
  for (const auto& [name, sub_value] : value.items()) {
    const KeySpec* sub = find_key(spec.sub_keys, name);
    if (sub == nullptr) fail_unknown_key(api, spec.sub_keys, name, shown(spec, path));
    const std::string sub_path = shown(spec, path) + "." + name;
    if (sub_value.is_null() && sub->default_value.is_null()) {
      out.erase(name);  // null unsets a sub-key that has no default
      continue;
    }
    out[name] = normalize_value(api, *sub, sub_value, sub_path);
  }
  return out;
}

Json normalize_memory_size(std::string_view api, const KeySpec& spec, std::string_view path,
                           const Json& value) {
  const std::string allowed = spec.min_gb > 0 ? "a size such as \"2GB\", at least 1GB"
                                              : "a size such as \"3.5GB\", above 0GB";
  if (!value.is_string()) fail_value(api, spec, path, value, allowed);
  const std::string& text = value.get_ref<const std::string&>();
  std::uint64_t bytes = 0;
  try {
    bytes = parse_memory_size(text);
  } catch (const Error&) {
    fail_value(api, spec, path, value, allowed);
  }
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (static_cast<double>(bytes) < spec.min_gb * kGiB) fail_value(api, spec, path, value, allowed);
  return text;
}

Json normalize_strategy(std::string_view api, const KeySpec& spec, std::string_view path,
                        const Json& value) {
  const std::string allowed =
      "\"data_parallel\", \"full_batch\" or a list of lists of positive ints";
  if (value.is_string()) {
    for (const auto& choice : spec.choices) {
      if (choice == value.get<std::string>()) return value;
    }
    fail_value(api, spec, path, value, allowed);
  }
  if (!value.is_array() || value.empty()) fail_value(api, spec, path, value, allowed);
  for (const auto& inner : value) {
    if (!inner.is_array()) fail_value(api, spec, path, value, allowed);
    for (const auto& number : inner) {
      if (!number.is_number_integer() || number.get<std::int64_t>() < 1) {
        fail_value(api, spec, path, value, allowed);
      }
    }
  }
  return value;
}

Json normalize_int_list(std::string_view api, const KeySpec& spec, std::string_view path,
                        const Json& value) {
  const std::string allowed = "a list of non-negative, ascending integers";
  if (!value.is_array()) fail_value(api, spec, path, value, allowed);
  std::int64_t previous = -1;
  for (const auto& number : value) {
    if (!number.is_number_integer() || number.get<std::int64_t>() <= previous) {
      fail_value(api, spec, path, value, allowed);
    }
    previous = number.get<std::int64_t>();
  }
  return value;
}

Json normalize_by_type(std::string_view api, const KeySpec& spec, std::string_view path,
                       const Json& value) {
  switch (spec.type) {
    case ValueType::kBool:
      if (!value.is_boolean()) fail_value(api, spec, path, value, "a bool (true or false)");
      return value;
    case ValueType::kInt:
      return normalize_int(api, spec, path, value);
    case ValueType::kString:
      if (!value.is_string()) fail_value(api, spec, path, value, "a string");
      // Strings name paths and options: a NUL byte would cut them silently where the system reads
      // them.
      if (value.get<std::string>().find('\0') != std::string::npos) {
        fail_value(api, spec, path, value, "a string without NUL bytes");
      }
      return value;
    case ValueType::kChoice:
      return normalize_choice(api, spec, path, value);
    case ValueType::kMode: {
      constexpr std::string_view kAllowed = "GRAPH_MODE (0) or PYNATIVE_MODE (1)";
      if (value.is_number_integer()) {
        const auto number = value.get<std::int64_t>();
        if (number == 0 || number == 1) return number;
      } else if (value.is_string()) {
        const std::string name = lower(value.get<std::string>());
        if (name == "graph_mode" || name == "graph") return 0;
        if (name == "pynative_mode" || name == "pynative") return 1;
      }
      fail_value(api, spec, path, value, kAllowed);
    }
    case ValueType::kSaveGraphs: {
      constexpr std::string_view kAllowed = "one of [0, 1, 2, 3, true, false]";
      if (value.is_boolean()) return value.get<bool>() ? 2 : 0;
      if (value.is_number_integer()) {
        const auto number = value.get<std::int64_t>();
        if (number >= 0 && number <= 3) return number;
      }
      fail_value(api, spec, path, value, kAllowed);
    }
    case ValueType::kMemorySize:
      return normalize_memory_size(api, spec, path, value);
    case ValueType::kIntList:
      return normalize_int_list(api, spec, path, value);
    case ValueType::kStrategy:
      return normalize_strategy(api, spec, path, value);
    case ValueType::kDict:
      return normalize_dict(api, spec, path, value);
    case ValueType::kOpaqueDict:
      if (!value.is_object()) fail_value(api, spec, path, value, "a dict");
      return value;
  }
  MF_FAIL(Internal, "unhandled value type of '", spec.name, "'");
}

void expect(bool ok, std::string_view api, std::string_view key, std::string_view what) {
  MF_CHECK(ok, InvalidArgument, "For '", api, "', '", key, "' is invalid: ", what, ".");
}

}  // namespace

std::string describe(const Json& value) {
  if (value.is_string()) {
    std::string out = "'";  // appended, not operator+: GCC 12 warns falsely (-Wrestrict) on "'" + s
    out += value.get_ref<const std::string&>();
    out += '\'';
    return out;
  }
  return value.dump();
}

[[noreturn]] void fail_unknown_key(std::string_view api, const std::vector<KeySpec>& table,
                                   std::string_view key, std::string_view owner) {
  std::string hint;
  // No key is longer than 64 characters: a longer one has no near neighbour worth the edit
  // distance (a 10 MiB key took seconds).
  const auto near = key.size() <= 64 ? closest_keys(table, key) : std::vector<std::string>{};
  for (std::size_t i = 0; i < near.size(); ++i) {
    hint += (i == 0 ? "; did you mean '" : (i + 1 == near.size() ? "' or '" : "', '")) + near[i];
  }
  if (!hint.empty()) hint += "'?";
  if (owner.empty()) {
    MF_FAIL(InvalidArgument, "For '", api, "', the keyword argument '", echo(key),
            "' is not recognized",
            hint.empty() ? "; run `mf context list` to see every key" : hint);
  }
  std::string valid;
  for (const auto& spec : table) valid += (valid.empty() ? "" : ", ") + spec.name;
  MF_FAIL(InvalidArgument, "For '", api, "', '", owner, "' has no sub-key '", echo(key), "'",
          hint.empty() ? "" : hint, " (valid sub-keys: ", valid, ")");
}

Json normalize_value(std::string_view api, const KeySpec& spec, const Json& value,
                     std::string_view path) {
  Json out = normalize_by_type(api, spec, path, value);
  if (spec.check != nullptr) spec.check(api, spec, out);
  return out;
}

Json value_from_text(std::string_view api, const KeySpec& spec, std::string_view text,
                     std::string_view path) {
  const std::string name = shown(spec, path);
  switch (spec.type) {
    case ValueType::kBool: {
      const std::string word = lower(text);
      if (word == "true" || word == "1") return true;
      if (word == "false" || word == "0") return false;
      fail_text(api, name, "a bool (true, false, 1 or 0)", text);
    }
    case ValueType::kInt: {
      if (auto number = parse_int(text)) return *number;
      fail_text(
          api, name,
          spec.min && spec.max ? "an integer in " + allowed_values(spec) : allowed_values(spec),
          text);
    }
    case ValueType::kMode:
      if (auto number = parse_int(text)) return *number;
      return std::string(text);
    case ValueType::kSaveGraphs: {
      const std::string word = lower(text);
      if (word == "true") return true;
      if (word == "false") return false;
      if (auto number = parse_int(text)) return *number;
      return std::string(text);  // normalize_value reports it with the allowed values
    }
    case ValueType::kString:
    case ValueType::kChoice:
      // `--set debug_level=1`: MindSpore's integer constant, as set_context takes it.
      if (spec.choice_by_index) {
        if (auto number = parse_int(text)) return *number;
      }
      return std::string(text);
    case ValueType::kMemorySize:
      return std::string(text);
    case ValueType::kStrategy:
      if (!text.empty() && text.front() != '[') return std::string(text);
      [[fallthrough]];
    case ValueType::kIntList:
    case ValueType::kDict:
    case ValueType::kOpaqueDict: {
      check_json_depth(text, detail::str_cat("the value of '", name, "'"));
      Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      MF_CHECK(!parsed.is_discarded(), InvalidArgument, "For '", api, "', the value of '", name,
               "' must be written as JSON (for example ", spec.example.dump(), "), but got '",
               echo(text), "'.");
      return parsed;
    }
  }
  MF_FAIL(Internal, "unhandled value type of '", spec.name, "'");
}

std::uint64_t parse_memory_size(std::string_view text) {
  // The documents' form: digits, an optional fraction, then "GB" ("1024GB", "3.5GB", "0.5GB").
  bool ok = text.size() > 2 && text.ends_with("GB");
  const std::string_view number = ok ? text.substr(0, text.size() - 2) : std::string_view{};
  std::size_t dots = 0;
  for (char c : number) {
    if (c == '.') {
      ++dots;
    } else if (!std::isdigit(static_cast<unsigned char>(c))) {
      ok = false;
    }
  }
  ok = ok && !number.empty() && dots <= 1 && number.front() != '.' && number.back() != '.' &&
       !(number.size() > 1 && number[0] == '0' && number[1] != '.');
  MF_CHECK(ok, InvalidArgument, "memory size '", text,
           "' must have the form \"xxGB\", for example \"2GB\" or \"3.5GB\"");
  const double gigabytes = std::stod(std::string(number));
  MF_CHECK(gigabytes > 0, InvalidArgument, "memory size '", text, "' must be above 0GB");
  return static_cast<std::uint64_t>(std::llround(gigabytes * 1024.0 * 1024.0 * 1024.0));
}

Json read_env_config(const std::string& path) {
  const Json document = read_json_document(path, "env_config_path file");
  const std::string where = "env_config_path file '" + echo(path) + "'";
  MF_CHECK(document.is_object(), InvalidArgument, where,
           " must hold a JSON object such as {\"sys\": {\"mem_Reuse\": true}}, but holds ",
           document.type_name());
  Json out = {{"rdr", {{"enable", false}, {"mode", 1}, {"path", ""}}},
              {"sys", {{"mem_Reuse", true}}}};
  if (document.contains("rdr")) {
    const Json& rdr = document["rdr"];
    MF_CHECK(rdr.is_object(), InvalidArgument, where, ": \"rdr\" must be an object");
    for (const auto& [name, value] : rdr.items()) {
      if (name == "enable") {
        MF_CHECK(value.is_boolean(), InvalidArgument, where, ": rdr.enable must be true or false");
      } else if (name == "mode") {
        MF_CHECK(
            value == 1 || value == 2, InvalidArgument, where,
            ": rdr.mode must be 1 (export on failure) or 2 (on failure and at normal end), got ",
            echo(value.dump()));
      } else if (name == "path") {
        MF_CHECK(value.is_string() && std::filesystem::path(value.get<std::string>()).is_absolute(),
                 InvalidArgument, where, ": rdr.path must be an absolute path, got ",
                 echo(value.dump()));
      } else {
        MF_FAIL(InvalidArgument, where, ": rdr has no field '", echo(name),
                "' (fields: enable, mode, path)");
      }
      out["rdr"][name] = value;
    }
  }
  if (document.contains("sys")) {
    const Json& sys = document["sys"];
    MF_CHECK(sys.is_object(), InvalidArgument, where, ": \"sys\" must be an object");
    if (sys.contains("mem_Reuse")) {
      MF_CHECK(sys["mem_Reuse"].is_boolean(), InvalidArgument, where,
               ": sys.mem_Reuse must be true or false, got ", echo(sys["mem_Reuse"].dump()));
      out["sys"]["mem_Reuse"] = sys["mem_Reuse"];
    }
  }
  return out;
}

void check_save_graphs_path(std::string_view api, const KeySpec&, const Json& value) {
  MF_CHECK(!value.get<std::string>().empty(), InvalidArgument, "For '", api,
           "', save_graphs_path must name a directory, but got ''; use '.' for the current one.");
}

void check_print_file_path(std::string_view api, const KeySpec&, const Json& value) {
  const std::string& path = value.get_ref<const std::string&>();
  std::error_code ec;
  MF_CHECK(path.empty() || !std::filesystem::is_directory(path, ec), InvalidArgument, "For '", api,
           "', print_file_path '", echo(path),
           "' is a directory; name a file (in that directory, for example).");
}

void check_device_target(std::string_view api, const KeySpec&, const Json& value) {
  MF_CHECK(value == "CPU", Unsupported, "For '", api, "', device_target '",
           echo(value.get<std::string>()),
           "' is not available in this build: modeflow runs on CPU only; use device_target='CPU'.");
}

void check_graph_kernel_flags(std::string_view api, const KeySpec&, const Json& value) {
  try {
    parse_graph_kernel_flags(value.get<std::string>());
  } catch (const Error& e) {
    MF_FAIL(InvalidArgument, "For '", api,
            "', the value of 'graph_kernel_flags' is invalid: ", e.message());
  }
}

std::vector<std::string> graph_kernel_flags_warnings(const Json& value) {
  std::vector<std::string> out;
  const GraphKernelFlags flags = parse_graph_kernel_flags(value.get<std::string>(), &out);
  for (std::string& warning : unknown_flag_warnings(flags)) out.push_back(std::move(warning));
  return out;
}

void check_ge_options(std::string_view api, const KeySpec&, const Json& value) {
  for (const auto& [name, group] : value.items()) {
    expect(name == "global" || name == "session", api, "ascend_config.ge_options",
           "its keys must be \"global\" or \"session\", got '" + name + "'");
    expect(group.is_object(), api, "ascend_config.ge_options",
           "\"" + name + "\" must be a dict of option names to values");
    for (const auto& [option, setting] : group.items()) {
      expect(setting.is_primitive(), api, "ascend_config.ge_options",
             "option '" + option + "' must be a string, number or bool");
    }
  }
}

void check_comm_fusion(std::string_view api, const KeySpec&, const Json& value) {
  for (const auto& [type, config] : value.items()) {
    expect(type == "allreduce" || type == "allgather" || type == "reducescatter", api,
           "comm_fusion",
           "the fusion type must be allreduce, allgather or reducescatter, got '" + type + "'");
    expect(config.is_object() && config.contains("mode"), api, "comm_fusion",
           "'" + type + "' must be a dict with \"mode\" and \"config\"");
    const Json& mode = config["mode"];
    const Json setting = config.value("config", Json());
    if (mode == "auto") continue;
    if (mode == "size") {
      expect(setting.is_number() && setting.get<double>() > 0, api, "comm_fusion",
             "'" + type + "' in mode \"size\" needs a \"config\" above 0 (MB)");
    } else if (mode == "index") {
      expect(type == "allreduce", api, "comm_fusion", "mode \"index\" applies to allreduce only");
      expect(setting.is_array() && std::all_of(setting.begin(), setting.end(),
                                               [](const Json& n) { return n.is_number_integer(); }),
             api, "comm_fusion", "mode \"index\" needs a list of integer indices as \"config\"");
    } else {
      expect(false, api, "comm_fusion",
             "the mode of '" + type + "' must be auto, size or index, got " + describe(mode));
    }
  }
}

void check_enable_ps(std::string_view api, const KeySpec&, const Json& value) {
  MF_CHECK(value == false, Unsupported, "For '", api,
           "', enable_ps=True is not supported: parameter-server training is not available in this "
           "build.");
}

}  // namespace mf::context
