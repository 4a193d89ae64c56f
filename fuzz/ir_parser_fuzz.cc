// The IR text parser (`mf ir check`, `mf run FILE.ir`): any text parses into a graph that verifies,
// or is refused with an error. What parses prints back to text that parses to the same print
// (the round trip ir/parser.h promises), and a small graph also runs op by op.

#include <map>
#include <string>

#include "engine/eager/dispatch.h"
#include "engine/eager/ir_runner.h"
#include "fuzz/fuzz_support.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  std::unique_ptr<ir::Graph> graph;
  if (!fuzz::accepts([&] {
        graph = ir::parse_graph(fuzz::as_text(data, size), "fuzz.ir");
        ir::verify(*graph);
      })) {
    return 0;
  }
  const std::string printed = ir::print_graph(*graph);
  std::unique_ptr<ir::Graph> again;
  if (!fuzz::accepts([&] { again = ir::parse_graph(printed, "printed.ir"); })) {
    fuzz::broken("a parsed graph's print does not parse");
  }
  if (ir::print_graph(*again) != printed) fuzz::broken("print(parse(print(g))) != print(g)");
  if (fuzz::small_enough_to_run(*graph)) {
    // The sync reports an asynchronous kernel's error here, as a refusal, not at exit.
    fuzz::accepts([&] {
      engine::IrRunner(std::move(graph)).run({}, 0);
      engine::sync();
    });
  }
  return 0;
}
