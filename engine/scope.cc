#include "engine/scope.h"

namespace mf::engine {
namespace {
thread_local std::string scope = "Default";
}

const std::string& current_scope() {
  return scope;
}

ScopeGuard::ScopeGuard(std::string_view instance_name, std::string_view class_name,
                       bool reserve_class_name)
    : previous_size_(scope.size()) {
  scope += '/';
  scope += instance_name;
  if (reserve_class_name) {
    scope += '-';
    scope += class_name;
  }
}

ScopeGuard::~ScopeGuard() {
  scope.resize(previous_size_);
}

ScopeOverride::ScopeOverride(std::string replacement) : previous_(std::move(scope)) {
  scope = std::move(replacement);
}

ScopeOverride::~ScopeOverride() {
  scope = std::move(previous_);
}

}  // namespace mf::engine
