// `mf cache ls|clear|verify|explain`: the persistent compile cache of the context
// (compile_cache_path/rank_<id>/). Registering the command also reads MF_CACHE_MAX_BYTES, once at
// start-up, because the engine itself never reads the environment.

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

#include "base/error.h"
#include "base/logging.h"
#include "context/context.h"
#include "context/fingerprint.h"
#include "engine/compile_cache/compile_cache.h"
#include "engine/engine_state.h"
#include "engine/graph/trace.h"
#include "engine/models/registry.h"
#include "runtime/memory_format.h"
#include "tools/commands.h"

namespace mf::tools {
namespace {

// "1073741824", "64M", "512KiB", "2G": bytes with an optional binary suffix; nullopt otherwise.
std::optional<std::uint64_t> parse_bytes(std::string text) {
  if (text.empty()) return std::nullopt;
  std::uint64_t scale = 1;
  for (const auto& [suffix, factor] : {std::pair{"KiB", 1ull << 10},
                                       {"MiB", 1ull << 20},
                                       {"GiB", 1ull << 30},
                                       {"K", 1ull << 10},
                                       {"M", 1ull << 20},
                                       {"G", 1ull << 30}}) {
    if (text.size() > std::strlen(suffix) && text.ends_with(suffix)) {
      text.resize(text.size() - std::strlen(suffix));
      scale = factor;
      break;
    }
  }
  if (text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::strtoull(text.c_str(), nullptr, 10) * scale;
}

void apply_cache_environment() {
  const char* env = std::getenv("MF_CACHE_MAX_BYTES");
  if (env == nullptr || *env == '\0') return;
  engine::CompileCacheSettings settings = engine::compile_cache_settings();
  if (auto bytes = parse_bytes(env)) {
    settings.max_bytes = *bytes;
    engine::set_compile_cache_settings(settings);
  } else {
    log::warn("MF_CACHE_MAX_BYTES='{}' is not a byte count (e.g. 1073741824 or 64M); using {}", env,
              settings.max_bytes);
  }
}

std::string format_time(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

engine::CompileCache context_cache() {
  return engine::CompileCache(engine::current_policy()->compile_cache_dir.value);
}

void list_entries() {
  const engine::CompileCache cache = context_cache();
  const auto entries = cache.list();
  std::uint64_t total = 0;
  for (const auto& e : entries) total += e.bytes;
  std::printf("compile cache %s: %zu entr%s, %s (bound %s)\n", cache.dir().string().c_str(),
              entries.size(), entries.size() == 1 ? "y" : "ies",
              runtime::format_bytes(total).c_str(),
              runtime::format_bytes(engine::compile_cache_settings().max_bytes).c_str());
  if (entries.empty()) return;
  std::printf("%-16s  %10s  %-19s  %-19s  %s\n", "KEY", "SIZE", "LAST USED", "CREATED", "SUMMARY");
  for (const auto& e : entries) {
    std::printf("%-16s  %10s  %-19s  %-19s  %s\n", e.key.c_str(),
                runtime::format_bytes(e.bytes).c_str(), format_time(e.last_used).c_str(),
                e.problem.empty() ? format_time(e.created).c_str() : "-",
                e.problem.empty() ? e.summary.c_str() : ("UNREADABLE: " + e.problem).c_str());
  }
}

void verify_entries() {
  const engine::CompileCache cache = context_cache();
  const auto entries = cache.verify();
  std::string bad;
  size_t bad_count = 0;
  for (const auto& e : entries) {
    if (e.problem.empty()) {
      std::printf("ok   %s  %s\n", e.key.c_str(), e.summary.c_str());
    } else {
      std::printf("BAD  %s  %s\n", e.key.c_str(), e.problem.c_str());
      bad += (bad.empty() ? "" : ", ") + e.key;
      ++bad_count;
    }
  }
  std::printf("%zu entr%s checked in %s\n", entries.size(), entries.size() == 1 ? "y" : "ies",
              cache.dir().string().c_str());
  MF_CHECK(bad_count == 0, DataLoss, bad_count, " of ", entries.size(),
           " compile-cache entries are damaged: ", bad,
           " (a run replaces them; `mf cache clear` removes everything)");
}

struct ExplainOptions {
  std::string net;
  std::uint64_t seed = 0;
  bool components = false;
};

// Traces the network as GRAPH mode would and asks the cache about its key, without compiling.
void explain(const ExplainOptions& options) {
  const models::NetSpec& spec = models::find_net(options.net);
  auto net = spec.make(options.seed);
  const Tensor x = spec.make_input(options.seed);
  // Only GRAPH mode compiles, so the question is always about GRAPH mode.
  if (engine::current_policy()->mode.value != context::ExecutionMode::kGraph) {
    context::set({{"mode", "GRAPH_MODE"}});
    std::printf("note: explaining for GRAPH_MODE (the only mode that compiles)\n");
  }
  const context::Snapshot snapshot = context::snapshot();
  const context::Policy policy = context::derive_policy(snapshot, net->jit_level());
  const context::Fingerprint fingerprint = context::fingerprint(snapshot, policy);
  engine::TraceResult trace = engine::Tracer::trace(*net, x, policy.max_call_depth.value,
                                                    policy.reserve_class_name_in_scope.value);
  const engine::CacheKey key = engine::make_cache_key(*trace.graph, x.type(), fingerprint);
  const engine::CompileCache cache(policy.compile_cache_dir.value);
  std::printf("key %s: %s\n", key.hex.c_str(), key.summary.c_str());
  if (options.components) {
    for (const auto& [name, value] : key.components) {
      std::printf("  %s = %s\n", name.c_str(), value.c_str());
    }
  }
  if (!policy.compile_cache.value) {
    std::printf("note: enable_compile_cache is off, so runs neither read nor write this cache\n");
  }
  std::printf("%s\n", cache.explain(key).text.c_str());
}

}  // namespace

void add_cache_command(CLI::App& app, GlobalOptions& global) {
  apply_cache_environment();
  CLI::App* cmd = app.add_subcommand(
      "cache", "The persistent compile cache under compile_cache_path/rank_<id>/");
  cmd->require_subcommand(1);
  add_global_options(*cmd, global);

  CLI::App* ls = cmd->add_subcommand("ls", "List entries: key, size, last use, summary");
  add_global_options(*ls, global);
  ls->callback([&global] {
    apply_global_options(global);
    list_entries();
  });

  CLI::App* clear = cmd->add_subcommand("clear", "Remove every entry");
  add_global_options(*clear, global);
  clear->callback([&global] {
    apply_global_options(global);
    const engine::CompileCache cache = context_cache();
    const size_t removed = cache.clear();
    std::printf("removed %zu entr%s from %s\n", removed, removed == 1 ? "y" : "ies",
                cache.dir().string().c_str());
  });

  CLI::App* verify = cmd->add_subcommand(
      "verify", "Check every entry's header and checksum; exit 1 naming the damaged ones");
  add_global_options(*verify, global);
  verify->callback([&global] {
    apply_global_options(global);
    verify_entries();
  });

  auto options = std::make_shared<ExplainOptions>();
  CLI::App* explain_cmd = cmd->add_subcommand(
      "explain", "Trace NET under the context and say whether it would hit, and if not, why");
  explain_cmd->add_option("net", options->net, "A network from `mf nets`")->required();
  explain_cmd->add_option("--seed", options->seed, "Seed of the weights and input (default 0)");
  explain_cmd->add_flag("--components", options->components, "Print every key component");
  add_global_options(*explain_cmd, global);
  explain_cmd->callback([options, &global] {
    apply_global_options(global);
    explain(*options);
  });
}

}  // namespace mf::tools
