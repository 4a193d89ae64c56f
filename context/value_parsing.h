#pragma once
// Checking and converting one value against its KeySpec: the rules for sizes ("xxGB"), modes,
// save_graphs, choices, dicts and their sub-keys, and the text form used by --set.

#include <cstdint>
#include <string>
#include <string_view>

#include "context/key_table.h"

namespace mf::context {

// The API name that error messages start with ("For 'context.set_context', ...").
inline constexpr std::string_view kSetContextApi = "context.set_context";
inline constexpr std::string_view kGetContextApi = "context.get_context";
inline constexpr std::string_view kSetAutoParallelApi = "context.set_auto_parallel_context";
inline constexpr std::string_view kGetAutoParallelApi = "context.get_auto_parallel_context";
inline constexpr std::string_view kSetPsApi = "context.set_ps_context";
inline constexpr std::string_view kGetPsApi = "context.get_ps_context";

// Checks `value` against `spec` and returns the stored form (mode and save_graphs as ints, choices
// in their canonical spelling, dicts completed with their sub-keys' defaults). `path` is the name
// shown in messages ("jit_config.jit_level"); empty means spec.name. Throws InvalidArgument (or
// Unsupported).
Json normalize_value(std::string_view api, const KeySpec& spec, const Json& value,
                     std::string_view path = {});

// Converts the text of a --set assignment to a JSON value of the key's declared type (not yet
// checked).
Json value_from_text(std::string_view api, const KeySpec& spec, std::string_view text,
                     std::string_view path = {});

// "3.5GB" -> bytes. Throws InvalidArgument when the text is not of the form "xxGB" or not above 0.
std::uint64_t parse_memory_size(std::string_view text);

// A value as messages show it: 'text' for strings, JSON otherwise.
std::string describe(const Json& value);

// The unknown-key error, with up to three suggestions: "For 'api', the keyword argument 'x' is not
// recognized; did you mean 'y'?".
[[noreturn]] void fail_unknown_key(std::string_view api, const std::vector<KeySpec>& table,
                                   std::string_view key, std::string_view owner = {});

// Reads an env_config_path file: {"rdr": {"enable", "mode", "path"}, "sys": {"mem_Reuse"}}. Returns
// it with every field present (defaults filled in). Throws NotFound / InvalidArgument naming the
// file.
Json read_env_config(const std::string& path);

// Extra checks referenced from the key tables.
void check_device_target(std::string_view api, const KeySpec& spec, const Json& value);
void check_save_graphs_path(std::string_view api, const KeySpec& spec, const Json& value);
void check_print_file_path(std::string_view api, const KeySpec& spec, const Json& value);
void check_graph_kernel_flags(std::string_view api, const KeySpec& spec, const Json& value);
// One warning per unknown flag of a valid graph_kernel_flags value (they are ignored).
std::vector<std::string> graph_kernel_flags_warnings(const Json& value);
void check_ge_options(std::string_view api, const KeySpec& spec, const Json& value);
void check_comm_fusion(std::string_view api, const KeySpec& spec, const Json& value);
void check_enable_ps(std::string_view api, const KeySpec& spec, const Json& value);

}  // namespace mf::context
