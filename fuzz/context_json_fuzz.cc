// Context JSON files (`mf --context FILE`): any file is checked key by key and accepted, or refused
// with an error naming the file; nothing in the live context changes while checking.

#include "context/context.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  const auto file = fuzz::write_scratch("context", data, size);
  context::Json document;
  if (!fuzz::accepts([&] { document = context::read_json_file(file); })) return 0;
  // read_json_file checked every value: setting them must succeed.
  if (!fuzz::accepts([&] { context::set(document); })) {
    fuzz::broken("a context file that read_json_file accepted fails in set()");
  }
  context::reset();
  return 0;
}
