#include "runtime/dnnl/prepare.h"

#include <map>
#include <mutex>
#include <string>

#include "runtime/dnnl/engine.h"

namespace mf::runtime::dnnl_rt {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, PrepareFn, std::less<>> fns;
};

Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

PreparerRegistration::PreparerRegistration(std::string_view op, PrepareFn fn) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.fns[std::string(op)] = fn;
}

Prepared prepare(std::string_view op, const PrepareRequest& request) {
  PrepareFn fn = nullptr;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.fns.find(op);
    if (it == r.fns.end()) return {};
    fn = it->second;
  }
  // oneDNN sizes a primitive's work split by OpenMP's thread count at creation.
  ScopedOmpThreads omp(request.threads);
  return fn(request);
}

}  // namespace mf::runtime::dnnl_rt
