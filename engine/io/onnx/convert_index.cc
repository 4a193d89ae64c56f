// ONNX import: ops on positions and arrangements (ArgMax, ArgMin, Range, CumSum, Tile, Trilu,
// DepthToSpace, SpaceToDepth). Inputs that decide a shape or an attribute (Tile's repeats, Range's
// bounds, CumSum's axis, Trilu's k) must be known while importing. Within opsets 7 to 18 these ops
// changed only by types and optional attributes (select_last_index from 12, DepthToSpace's mode
// from 11) whose defaults are the older behaviour; Range and CumSum exist from 11, Trilu from 14.

#include "engine/io/onnx/importer_impl.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"

namespace mf::onnx::detail {

void Importer::add_index_converters(ConverterTable& table) {
  add_converters(table, {
                            {"ArgMax", &Importer::convert_arg_extreme},
                            {"ArgMin", &Importer::convert_arg_extreme},
                            {"CumSum", &Importer::convert_cumsum},
                            {"DepthToSpace", &Importer::convert_depth_to_space},
                            {"Range", &Importer::convert_range},
                            {"SpaceToDepth", &Importer::convert_space_to_depth},
                            {"Tile", &Importer::convert_tile},
                            {"Trilu", &Importer::convert_trilu},
                        });
}

void Importer::convert_arg_extreme() {
  Value x = input(0);
  const char* op = node_->op_type() == "ArgMax" ? "argmax" : "argmin";
  set_output(0, emit(op, {x},
                     {{"axis", attr_int("axis", 0)},
                      {"keep_dims", attr_int("keepdims", 1) != 0},
                      {"select_last_index", attr_int("select_last_index", 0) != 0}}));
}

void Importer::convert_tile() {
  Value x = input(0);
  const std::vector<int64_t> repeats = known_ints(1, "repeats");
  const bool identity =
      int64_t(repeats.size()) == rank_of(x) &&
      std::all_of(repeats.begin(), repeats.end(), [](int64_t r) { return r == 1; });
  if (identity) {
    set_output(0, x);
    return;
  }
  set_output(0, emit("tile", {x}, {{"multiples", repeats}}));
}

void Importer::convert_range() {
  MF_CHECK(opset_ >= 11, InvalidArgument, describe(),
           ": Range exists from opset 11 on; the node is malformed");
  // The output's length is computed from the three values, so all must be known.
  const HostTensor start = require_known(0, "start");
  const HostTensor limit = require_known(1, "limit");
  const HostTensor delta = require_known(2, "delta");
  const DType dtype = start.type.dtype;
  const std::pair<const HostTensor*, const char*> bounds[] = {
      {&start, "start"}, {&limit, "limit"}, {&delta, "delta"}};
  for (const auto& [t, what] : bounds) {
    MF_CHECK(t->size() == 1, InvalidArgument, describe(), ": ", what,
             " must be a scalar, got shape ", ir::shape_to_string(t->type.shape));
    MF_CHECK(t->type.dtype == dtype, InvalidArgument, describe(),
             ": start, limit and delta must share one element type, but start is ",
             ir::dtype_name(dtype), " and ", what, " is ", ir::dtype_name(t->type.dtype));
    // The op takes its bounds as doubles: int64 values beyond 2^53 would be rounded.
    if (dtype == DType::kInt64) {
      const int64_t v = t->ints()[0];
      if (v > (int64_t{1} << 53) || v < -(int64_t{1} << 53)) {
        unsupported(std::string("Range over INT64 values beyond 2^53 (") + what + " = " +
                    std::to_string(v) + ") is not supported");
      }
    }
  }
  set_output(0, emit("range", {},
                     {{"start", start.at(0)},
                      {"limit", limit.at(0)},
                      {"delta", delta.at(0)},
                      {"dtype", dtype}}));
}

void Importer::convert_cumsum() {
  MF_CHECK(opset_ >= 11, InvalidArgument, describe(),
           ": CumSum exists from opset 11 on; the node is malformed");
  Value x = input(0);
  const std::vector<int64_t> axis = known_ints(1, "axis");
  MF_CHECK(axis.size() == 1, InvalidArgument, describe(), ": axis must hold one value, got ",
           axis.size());
  set_output(0, emit("cumsum", {x},
                     {{"axis", axis[0]},
                      {"exclusive", attr_int("exclusive", 0) != 0},
                      {"reverse", attr_int("reverse", 0) != 0}}));
}

void Importer::convert_trilu() {
  MF_CHECK(opset_ >= 14, InvalidArgument, describe(),
           ": Trilu exists from opset 14 on; the node is malformed");
  Value x = input(0);
  int64_t k = 0;
  if (has_input(1)) {
    const std::vector<int64_t> ks = known_ints(1, "k");
    MF_CHECK(ks.size() == 1, InvalidArgument, describe(), ": k must hold one value, got ",
             ks.size());
    k = ks[0];
  }
  set_output(0, emit("trilu", {x}, {{"upper", attr_int("upper", 1) != 0}, {"k", k}}));
}

void Importer::convert_depth_to_space() {
  Value x = input(0);
  MF_CHECK(has_attr("blocksize"), InvalidArgument, describe(), " has no blocksize attribute");
  set_output(
      0, emit("depth_to_space", {x},
              {{"block_size", attr_int("blocksize", 0)}, {"mode", attr_string("mode", "DCR")}}));
}

void Importer::convert_space_to_depth() {
  Value x = input(0);
  MF_CHECK(has_attr("blocksize"), InvalidArgument, describe(), " has no blocksize attribute");
  set_output(0, emit("space_to_depth", {x}, {{"block_size", attr_int("blocksize", 0)}}));
}

}  // namespace mf::onnx::detail
