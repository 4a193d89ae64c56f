// The ONNX importer (`mf run FILE.onnx`): any bytes import into a graph that verifies, or are
// refused with an error; a small imported graph also runs op by op with its own weights.

#include "engine/eager/dispatch.h"
#include "engine/eager/ir_runner.h"
#include "engine/io/onnx/importer.h"
#include "fuzz/fuzz_support.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  onnx::ImportedModel model;
  if (!fuzz::accepts([&] {
        model = onnx::import_onnx_model_from_bytes(fuzz::as_text(data, size), "fuzz.onnx");
        ir::verify(*model.graph);
      })) {
    return 0;
  }
  if (fuzz::small_enough_to_run(*model.graph)) {
    // The sync reports an asynchronous kernel's error here, as a refusal, not at exit.
    fuzz::accepts([&] {
      engine::IrRunner(std::move(model.graph)).run(model.weights, 0);
      engine::sync();
    });
  }
  return 0;
}
