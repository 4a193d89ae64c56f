#include "context/fingerprint.h"

#include <cstdio>
#include <map>

#include "context/key_table.h"

namespace mf::context {
namespace {

// Bump when the component list changes meaning, so old cache entries stop matching.
constexpr std::string_view kFormat = "3";

std::uint64_t fnv1a(std::uint64_t hash, std::string_view bytes) {
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

}  // namespace

std::string Fingerprint::hex() const {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

Fingerprint fingerprint(const Snapshot& snapshot, const Policy& policy) {
  Fingerprint out;
  auto& parts = out.components;
  parts.emplace_back("fingerprint.format", std::string(kFormat));
  for (const auto& spec : context_keys()) {
    // graph_kernel_flags counts by what it means (policy.fusion_flags below, canonical): an
    // ignored unknown flag, or the same flags in another order, must not make a new entry.
    if (spec.compile_relevant && spec.name != "graph_kernel_flags") {
      parts.emplace_back(spec.name, snapshot.values()[spec.name].dump());
    }
  }
  for (const auto& spec : auto_parallel_keys()) {
    if (spec.compile_relevant) {
      parts.emplace_back("auto_parallel_context." + spec.name,
                         snapshot.auto_parallel()[spec.name].dump());
    }
  }
  // Derived decisions: they fold in inputs that are not keys of their own (a network's JitConfig,
  // the env_config_path file's mem_Reuse) and the rules that combine keys.
  const auto flag = [](bool value) { return std::string(value ? "1" : "0"); };
  parts.emplace_back("policy.jit_level", std::string(to_string(policy.jit_level.value)));
  parts.emplace_back("policy.infer_boost", flag(policy.infer_boost.value));
  parts.emplace_back("policy.format_transform", flag(policy.format_transform.value));
  parts.emplace_back("policy.fusion_level", std::to_string(policy.fusion_level.value));
  parts.emplace_back("policy.fusion_flags", to_string(policy.fusion_flags));
  parts.emplace_back("policy.stitch_fusion", flag(policy.stitch_fusion.value));
  parts.emplace_back("policy.parallel_fusion", flag(policy.parallel_fusion.value));
  parts.emplace_back("policy.recompute_fusion", flag(policy.recompute_fusion.value));
  parts.emplace_back("policy.memory_optimize_level",
                     std::string(to_string(policy.memory_optimize_level.value)));
  // mem_Reuse=false changes only a planned arena (O1); O0 pools every tensor either way.
  parts.emplace_back("policy.memory_reuse",
                     flag(policy.memory_reuse.value ||
                          policy.memory_optimize_level.value == MemoryOptimizeLevel::kO0));
  parts.emplace_back("policy.reserve_class_name_in_scope",
                     flag(policy.reserve_class_name_in_scope.value));
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const auto& [name, value] : parts) {
    hash = fnv1a(hash, name);
    hash = fnv1a(hash, std::string_view("\0", 1));
    hash = fnv1a(hash, value);
    hash = fnv1a(hash, "\n");
  }
  out.hash = hash;
  return out;
}

std::vector<std::string> differing_components(const Fingerprint& a, const Fingerprint& b) {
  std::map<std::string, std::pair<const std::string*, const std::string*>> joined;
  for (const auto& [name, value] : a.components) joined[name].first = &value;
  for (const auto& [name, value] : b.components) joined[name].second = &value;
  std::vector<std::string> out;
  for (const auto& [name, values] : joined) {
    if (!values.first || !values.second || *values.first != *values.second) out.push_back(name);
  }
  return out;
}

}  // namespace mf::context
