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
  // An empty operand: nothing worth preparing (oneDNN refuses zero-sized descriptors); the kernel
  // decides at run time, where an empty result is never computed.
  for (const ir::TensorType& input : request.inputs) {
    if (ir::num_elements(input.shape) == 0) return {};
  }
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
