#include "context/parallel_context.h"

#include "base/error.h"
#include "context/store.h"
#include "context/value_parsing.h"

namespace mf::context {
namespace {

using detail::PendingWarning;
using detail::State;

void set_in_table(std::string_view api, const std::vector<KeySpec>& table, Json State::*target,
                  const Json& values) {
  MF_CHECK(values.is_object(), InvalidArgument, "For '", api,
           "', expected an object of key -> value, but got ", echo(describe(values)), ".");
  detail::update_state([&](State& state, std::vector<PendingWarning>& warnings) {
    for (const auto& [key, value] : values.items()) {
      detail::apply_key(api, table, state.*target, key, value, warnings);
    }
  });
}

}  // namespace

void set_auto_parallel_context(const Json& values) {
  set_in_table(kSetAutoParallelApi, auto_parallel_keys(), &State::auto_parallel, values);
}

Json get_auto_parallel_context(std::string_view key) {
  return snapshot().get_auto_parallel(key);
}

void reset_auto_parallel_context() {
  detail::update_state([](State& state, std::vector<PendingWarning>&) {
    state.auto_parallel = defaults_of(auto_parallel_keys());
  });
}

void set_ps_context(const Json& values) {
  set_in_table(kSetPsApi, ps_keys(), &State::ps, values);
}

Json get_ps_context(std::string_view key) {
  return snapshot().get_ps(key);
}

void reset_ps_context() {
  detail::update_state(
      [](State& state, std::vector<PendingWarning>&) { state.ps = defaults_of(ps_keys()); });
}

}  // namespace mf::context
