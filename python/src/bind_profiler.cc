// The profiler for modeflow.Profiler (python/modeflow/profiler.py): start, and stop-and-write.
#include "bindings.h"
#include "engine/engine_state.h"
#include "runtime/profile_report.h"
#include "runtime/profiler.h"

namespace mf::python {

void bind_profiler(py::module_& m) {
  m.def(
      "_profiler_start", [](size_t max_events) { runtime::Profiler::start(max_events); },
      py::arg("max_events"));
  m.def("_profiler_active", [] { return runtime::Profiler::active(); });
  m.def(
      "_profiler_stop",
      [](const std::string& output_path) {
        // The thread count the work ran at, read while the GIL is held (the context is Python's).
        const int threads = engine::current_policy()->intra_op_threads.value;
        py::gil_scoped_release release;  // measuring the machine takes about a second
        const runtime::Profile profile = runtime::Profiler::stop();
        if (!output_path.empty()) {
          runtime::write_profile(output_path, profile,
                                 runtime::measure_machine_for_profile(threads));
        }
        return std::pair<size_t, size_t>(profile.events.size(), profile.dropped);
      },
      py::arg("output_path"));
}

}  // namespace mf::python
