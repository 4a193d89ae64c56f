// A stranger's program: includes the umbrella header of an installed modeflow and uses the context.
#include <modeflow/modeflow.h>

#include <iostream>

int main() {
  mf::context::set({{"mode", "GRAPH_MODE"}});
  const bool graph = mf::context::get("mode") == 0;
  bool rejected = false;
  try {
    mf::context::set({{"no_such_key", 1}});
  } catch (const mf::Error& e) {
    rejected = e.kind() == mf::ErrorKind::kInvalidArgument;
  }
  std::cout << "consumer: graph=" << graph << " rejected=" << rejected << "\n";
  return graph && rejected ? 0 : 1;
}
