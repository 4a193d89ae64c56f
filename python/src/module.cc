// The extension module modeflow._modeflow; the pure-Python package (python/modeflow/) re-exports it
// under MindSpore's names.
#include "bindings.h"

PYBIND11_MODULE(_modeflow, m) {
  using namespace mf::python;
  m.doc() = "modeflow's engine, bound for Python (import modeflow, not this module)";
  bind_errors(m);
  install_warning_sink();
  bind_context(m);
  bind_tensor(m);
  bind_ops(m);
  bind_nn(m);
  bind_profiler(m);
  bind_autodiff(m);
  bind_checkpoint(m);
  bind_dataset(m);
  bind_train(m);
  bind_comm(m);
}
