#pragma once
// The public umbrella header: everything a user of modeflow needs, one include.

#include "base/error.h"
#include "base/logging.h"
#include "context/context.h"
#include "context/parallel_context.h"
#include "context/policy.h"
#include "context/replacement_api.h"
#include "engine/eager/dispatch.h"
#include "engine/eager/ir_runner.h"
#include "engine/graph/jit.h"
#include "engine/models/registry.h"
#include "engine/nn/cell.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine/tensor.h"
#include "ir/graph.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace mf {
using Json = context::Json;
}  // namespace mf
