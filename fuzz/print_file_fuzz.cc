// The print-file reader (`mf print-parse FILE`): any file reads into tensors whose bytes match
// their shapes, or is refused with an error.

#include "engine/io/print_file.h"
#include "fuzz/fuzz_support.h"
#include "runtime/kernels/print_sink.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  const auto file = fuzz::write_scratch("print", data, size);
  fuzz::accepts([&] {
    for (const auto& record : engine::read_print_file(file)) {
      // Formatting is what print-parse does next: it must cope with any shape read.
      const Tensor& t = record.tensor;
      (void)runtime::ops::format_tensor({const_cast<void*>(t.raw_data()), t.type()});
    }
  });
  return 0;
}
