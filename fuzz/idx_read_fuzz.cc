// The IDX reader (modeflow.dataset, engine/data/idx.h), raw and gzip-compressed: any file loads
// into an array whose bytes match its shape and element type exactly, or is refused with an error.

#include "engine/data/idx.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  const auto file = fuzz::write_scratch("idx", data, size);
  data::IdxArray array;
  // A small limit keeps the fuzzer fast; the checks are the same at any limit.
  if (!fuzz::accepts([&] { array = data::read_idx(file, uint64_t{1} << 24); })) return 0;
  const auto elements = ir::try_num_elements(array.shape);
  if (!elements.has_value()) fuzz::broken("a loaded IDX array has an impossible shape");
  if (array.bytes.size() != size_t(*elements) * data::idx_type_size(array.type)) {
    fuzz::broken("a loaded IDX array's bytes do not match its shape and type");
  }
  return 0;
}
