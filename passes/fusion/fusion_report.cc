#include "passes/fusion/fusion_report.h"

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace mf::passes::fusion {

FusionReport::FusionReport(std::string pass, const CompileOptions& options)
    : pass_(std::move(pass)),
      options_(options),
      enabled_(options.dump.level >= 2 || options.fusion.dump_as_text) {}

std::string FusionReport::text() const {
  std::string out = detail::str_cat("# graph_kernel_dump: pass '", pass_, "' at fusion opt_level ",
                                    options_.fusion_level, "\n");
  out += detail::str_cat("# ", fused_.size(), " fused kernel(s), ", rejected_.size(),
                         " candidate(s) not fused\n");
  for (const std::string& line : notes_) out += "# " + line + "\n";
  out += "\n";
  for (const FusedKernelRecord& r : fused_) {
    // A fused node names its body subgraph (@fused_3); a fused op (matmul_bias#40) its node.
    const std::string kernel = r.body.find('#') == std::string::npos ? "@" + r.body : r.body;
    out += detail::str_cat("fused kernel ", kernel, " in @", r.graph, "\n");
    out += detail::str_cat("  rule: ", r.rule, " (enabled by opt_level ", r.level, ")\n");
    std::string members;
    for (const std::string& m : r.members) members += (members.empty() ? "" : ", ") + m;
    out += detail::str_cat("  members (", r.members.size(), "): ", members, "\n");
    out += detail::str_cat("  memory traffic saved: ", r.bytes_saved, " bytes\n");
    if (!r.kernel.empty()) out += "  kernel: " + r.kernel + "\n";
  }
  if (!rejected_.empty()) out += "\nnot fused:\n";
  for (const RejectionRecord& r : rejected_) {
    out += detail::str_cat("  ", r.candidate, r.target.empty() ? "" : " " + r.target, " in @",
                           r.graph, ": ", r.reason, "\n");
  }
  return out;
}

void FusionReport::write() const {
  if (!enabled_) return;
  namespace fs = std::filesystem;
  const fs::path base = options_.dump.dir.empty() ? fs::path(".") : options_.dump.dir;
  const fs::path dir = base / "graph_kernel_dump";
  std::error_code ec;
  fs::create_directories(dir, ec);
  MF_CHECK(!ec, InvalidArgument, "cannot create the fusion dump directory ", dir.string(), ": ",
           ec.message());
  const std::string stem =
      options_.dump.prefix.empty() ? pass_ : options_.dump.prefix + "_" + pass_;
  const fs::path file = dir / (stem + ".txt");
  std::ofstream out(file, std::ios::app);
  MF_CHECK(out.good(), InvalidArgument, "cannot write the fusion dump ", file.string());
  out << text();
  out.flush();
  MF_CHECK(out.good(), InvalidArgument, "writing the fusion dump ", file.string(),
           " failed (disk full?)");
}

}  // namespace mf::passes::fusion
