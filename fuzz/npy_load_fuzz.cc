// The .npy loader (`mf run --input NAME=FILE.npy`): any file loads into an array whose bytes match
// its dtype and shape exactly, or is refused with an error.

#include "engine/io/npy.h"
#include "fuzz/fuzz_support.h"
#include "ir/dtype.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  const auto file = fuzz::write_scratch("npy", data, size);
  npy::Array array;
  if (!fuzz::accepts([&] { array = npy::load(file); })) return 0;
  const auto elements = ir::try_num_elements(array.shape);
  if (!elements.has_value()) fuzz::broken("a loaded array has an impossible shape");
  if (array.bytes.size() != size_t(*elements) * ir::dtype_size(array.dtype)) {
    fuzz::broken("a loaded array's bytes do not match its shape and dtype");
  }
  return 0;
}
