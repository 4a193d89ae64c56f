// `mf print-parse FILE`: reads back what `print` wrote to print_file_path (MindSpore's
// parse_print).

#include <cstdio>

#include "base/error.h"
#include "engine/io/print_file.h"
#include "runtime/kernels/print_sink.h"
#include "tools/commands.h"

namespace mf::tools {

void add_print_command(CLI::App& app, GlobalOptions& global) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd =
      app.add_subcommand("print-parse", "Print the tensors recorded in a print_file_path file");
  cmd->add_option("file", *file, "The file print_file_path named")->required();
  add_global_options(*cmd, global);
  cmd->callback([file, &global] {
    apply_global_options(global);
    for (const auto& record : engine::read_print_file(*file)) {
      const Tensor& t = record.tensor;
      const ir::TensorView view{const_cast<void*>(t.raw_data()), t.type()};
      if (!record.prefix.empty()) std::printf("%s ", echo(record.prefix).c_str());
      std::printf("%s\n", runtime::ops::format_tensor(view).c_str());
    }
  });
}

}  // namespace mf::tools
