#pragma once
// Scope names of the cells being called on this thread, as MindSpore writes them:
// "Default/net-Mlp/fc1-Dense" (reserve_class_name_in_scope=true) or "Default/net/fc1" (false).

#include <string>
#include <string_view>

namespace mf::engine {

// The scope of the innermost cell being called on this thread ("Default" outside any cell).
const std::string& current_scope();

// Enters a cell for the life of the guard.
class ScopeGuard {
 public:
  ScopeGuard(std::string_view instance_name, std::string_view class_name, bool reserve_class_name);
  ~ScopeGuard();
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  size_t previous_size_;
};

// Sets the whole scope for the life of the guard: the backward of a node runs under its forward
// scope with "Gradients/" in front.
class ScopeOverride {
 public:
  explicit ScopeOverride(std::string scope);
  ~ScopeOverride();
  ScopeOverride(const ScopeOverride&) = delete;
  ScopeOverride& operator=(const ScopeOverride&) = delete;

 private:
  std::string previous_;
};

}  // namespace mf::engine
