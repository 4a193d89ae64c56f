// Command-line context values: each input line is one `--set KEY=VALUE` (the form also used for
// graph_kernel_flags="--opt_level=2 ..."); the whole input is also read as graph_kernel_flags text.
// Any text converts and sets, or is refused with an error.

#include <string>
#include <vector>

#include "context/context.h"
#include "context/graph_kernel_flags.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  mf::fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf;
  const std::string_view text = fuzz::as_text(data, size);
  std::vector<std::string> assignments;
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    assignments.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  fuzz::accepts([&] { context::set_from(assignments); });
  context::reset();
  fuzz::accepts([&] { (void)context::parse_graph_kernel_flags(text); });
  return 0;
}
