// The .ckpt loader (ms.load_checkpoint): any file loads into named tensors whose bytes match their
// dtype and shape exactly, and that save back to a file which loads to the same tensors; or it is
// refused with an error.

#include <cstring>

#include "engine/io/checkpoint.h"
#include "fuzz/fuzz_support.h"
#include "ir/dtype.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  const auto file = fuzz::write_scratch("ckpt", data, size);
  checkpoint::NamedTensors loaded;
  if (!fuzz::accepts([&] { loaded = checkpoint::load(file); })) return 0;
  for (const auto& [name, tensor] : loaded) {
    if (name.empty()) fuzz::broken("a loaded tensor has an empty name");
    const auto elements = ir::try_num_elements(tensor.shape());
    if (!elements.has_value()) fuzz::broken("a loaded tensor has an impossible shape");
    if (tensor.nbytes() != size_t(*elements) * ir::dtype_size(tensor.dtype())) {
      fuzz::broken("a loaded tensor's bytes do not match its shape and dtype");
    }
  }
  // What loaded saves, and loads back the same (names, types, bytes).
  const auto again_file = fuzz::write_scratch("ckpt-again", nullptr, 0);
  checkpoint::save(again_file, loaded);
  const auto again = checkpoint::load(again_file);
  if (again.size() != loaded.size()) fuzz::broken("a saved checkpoint loads a different count");
  for (size_t i = 0; i < again.size(); ++i) {
    const Tensor &a = loaded[i].second, &b = again[i].second;
    if (again[i].first != loaded[i].first || a.type() != b.type() ||
        std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) != 0) {
      fuzz::broken("a saved checkpoint does not load back the same tensors");
    }
  }
  return 0;
}
