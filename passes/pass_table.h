#pragma once
// Which passes run under given CompileOptions: built from the one table in passes/pass_table.cc.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "passes/compile_options.h"
#include "passes/compiler.h"
#include "passes/pipeline.h"

namespace mf::passes {

// The pipeline the options select, with --disable_pass / --enable_pass applied, in two phases:
// the front end (shape inference, inlining, simplification) and the back end (kernel selection).
// compile() dumps the "frontend" graph between them. InvalidArgument for a pass name that is not
// in the table, listing the known ones.
Pipeline build_frontend_pipeline(const CompileOptions& options);
Pipeline build_backend_pipeline(const CompileOptions& options);

// Names --enable_pass / --disable_pass accept, in table order without repeats.
std::vector<std::string> known_pass_names();

// One row of `mf passes`: a pass that runs under the options, and why.
struct PipelineRow {
  std::string name;
  std::string origin;  // "jit_level O1", "fusion opt_level 2", "--enable_pass"
  std::string group;   // "" or the fixed-point group it repeats in ("simplify")
};
std::vector<PipelineRow> describe_pipeline(const CompileOptions& options);

// A fresh instance of the pass called `name`; NotFound for an unknown name.
std::unique_ptr<Pass> make_pass(std::string_view name);

}  // namespace mf::passes
