#include "runtime/fused_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <unordered_map>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/error.h"
#include "runtime/fused_jit.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/strided.h"
#include "runtime/parallel.h"

namespace mf::runtime {
namespace {

using ir::Trait;

// Elements per tile: the intermediates of a tile (a few buffers of 4-8 KiB) stay in L1.
constexpr int64_t kTile = 1024;
// Rows at least this long split tiles at their ends (per-row values then need no buffer).
constexpr int64_t kMinRowTile = 256;
// Elements per parallel chunk, as the plain elementwise kernel uses.
constexpr int64_t kChunkElements = 32768;
// Elements per chunk of a kernel with reductions: rows whose stage buffers stay in L1/L2.
constexpr int64_t kStitchChunkElements = 8192;
// Chunks and tiles start at multiples of this many elements (a multiple of every SIMD width), so
// tiles of full-shape inputs start at aligned addresses: speed only, results do not depend on it.
constexpr int64_t kAlignElements = 16;
constexpr size_t kBufferAlign = 64;
// Outputs of an elementwise kernel at least this large go to memory with streaming stores: a
// plain store first reads the line it writes (a third more traffic), and the result is too big
// to be read back from cache by the next kernel anyway.
constexpr int64_t kStreamMinBytes = int64_t{8} << 20;
constexpr size_t kMaxElem = 8;

int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

enum class Kind { kParam, kConst, kFull, kRow, kReduce };

// Where a value lives during a chunk.
enum class Home {
  kInput,     // a parameter or constant: read in place (full shape), prefilled (scalar) or gathered
  kOutput,    // a body output: written to the output tensor, read back from there
  kChunk,     // read by a reduce or a later stage: one buffer over the chunk's elements
  kTileSlot,  // produced and consumed within one tile: a recycled per-tile buffer
  kRowBuffer  // one value per row of the chunk
};

struct ValueInfo {
  Kind kind = Kind::kParam;
  ir::TensorType type;
  size_t elem = 0;
  int param = -1;                          // kParam
  const ir::Constant* constant = nullptr;  // kConst
  int stage = 0;        // kFull: the stage computing it; others: first stage that may read it
  bool full = false;    // kParam/kConst: shape equals the iteration shape
  bool scalar = false;  // kParam/kConst: one element
  Home home = Home::kInput;
  int output = -1;            // kOutput: the body output it is written to
  int index = -1;             // kChunk / kTileSlot / kRowBuffer: which buffer
  ops::StridedView view;      // kParam/kConst broadcast to the iteration shape
  ops::StridedView row_view;  // kParam/kConst broadcast to the row shape
  bool row_ok = false;        // kParam/kConst: one value per row (or a scalar)
};

struct OpInfo {
  const ir::Node* node = nullptr;
  Kind kind = Kind::kFull;
  std::vector<int> inputs;  // value ids
  int output = -1;
  ir::TileFn tile = nullptr;
  ir::RowReduceFn reduce = nullptr;
  int stage = 0;  // kFull: its stage; kReduce: the stage whose tiles it follows; kRow: its stage
};

void* align_up(void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<void*>((v + kBufferAlign - 1) / kBufferAlign * kBufferAlign);
}

// Per-chunk scratch: one allocation carved into 64-byte-aligned buffers.
class Scratch {
 public:
  void add(size_t bytes) {
    offsets_.push_back(total_);
    total_ += (bytes + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
  }
  // One buffer per thread, grown as needed and kept: a chunk's scratch is often beyond malloc's
  // mmap threshold, and mapping fresh pages for every chunk would cost more than the math.
  // A chunk never runs another chunk on its thread before it ends, so one buffer per thread does.
  void allocate() {
    thread_local std::unique_ptr<char[]> storage;
    thread_local size_t capacity = 0;
    if (capacity < total_ + kBufferAlign) {
      capacity = total_ + kBufferAlign;
      storage.reset(new char[capacity]);
    }
    base_ = static_cast<char*>(align_up(storage.get()));
  }
  char* at(size_t i) const { return base_ + offsets_[i]; }

 private:
  std::vector<size_t> offsets_;
  size_t total_ = 0;
  char* base_ = nullptr;
};

void fill_value(void* dst, const void* value, size_t elem, int64_t n) {
  switch (elem) {
    case 1:
      std::memset(dst, *static_cast<const uint8_t*>(value), n);
      return;
    case 4: {
      uint32_t v;
      std::memcpy(&v, value, 4);
      std::fill_n(static_cast<uint32_t*>(dst), n, v);
      return;
    }
    case 8: {
      uint64_t v;
      std::memcpy(&v, value, 8);
      std::fill_n(static_cast<uint64_t*>(dst), n, v);
      return;
    }
  }
  MF_FAIL(Internal, "fused kernel: unsupported element size ", elem);
}

// dst[0, bytes) = src[0, bytes) with non-temporal stores where dst is 16-byte aligned (the write-
// combining buffers join them into whole lines); the caller fences (stream_fence) before another
// thread may read dst.
void stream_copy(char* dst, const char* src, size_t bytes) {
  size_t i = 0;
#if defined(__SSE2__)
  if (reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    for (; i + 16 <= bytes; i += 16) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    }
  }
#endif
  std::memcpy(dst + i, src + i, bytes - i);
}

void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

std::string shape_text(const ir::Shape& s) {
  return ir::shape_to_string(s);
}

}  // namespace

struct FusedKernel::Impl {
  ir::Shape shape;      // the iteration shape
  int64_t n = 0;        // its elements
  int64_t rows = 1;     // R: rows of the reductions (n when there is none)
  int64_t cols = 1;     // C: elements per row (1 when there is no reduction)
  ir::Shape row_shape;  // the kept leading axes (R elements)
  int reduces = 0;
  int stages = 1;
  int64_t rows_per_chunk = 1;
  bool stream_outputs = false;  // body outputs go through a tile buffer and streaming stores
  std::vector<ValueInfo> values;
  std::vector<OpInfo> ops;        // topological order
  std::vector<int> outputs;       // value id per body output
  std::vector<int> output_owner;  // per body output: the output another copy is written from
  int chunk_buffers = 0;
  std::vector<size_t> chunk_elem;  // element size of each chunk buffer
  int tile_slots = 0;
  int row_buffers = 0;
  size_t max_arity = 0;
  // Elementwise float32 bodies of ops the code generator covers run as generated code, every value
  // of a packet in a register; the tile evaluator below runs the rest.
  std::unique_ptr<FusedJit> jit;
  std::vector<int> jit_inputs;  // value id read through each of the generated code's inputs

  // Throws InvalidArgument with the reason when the body cannot be evaluated.
  explicit Impl(const ir::Graph& body) {
    MF_CHECK(body.num_nodes() > 0, InvalidArgument, "fused body @", body.name(), " has no ops");
    std::unordered_map<ir::Value, int, ir::ValueHash> id;
    auto add_value = [&](ir::Value v, Kind kind) {
      ValueInfo info;
      info.kind = kind;
      info.type = v.type();
      info.elem = ir::dtype_size(info.type.dtype);
      MF_CHECK(info.elem <= kMaxElem, InvalidArgument, "fused body @", body.name(), ": dtype ",
               ir::dtype_name(info.type.dtype), " is not supported");
      id[v] = static_cast<int>(values.size());
      values.push_back(std::move(info));
      return static_cast<int>(values.size()) - 1;
    };
    for (size_t p = 0; p < body.num_parameters(); ++p) {
      values[add_value(body.parameter(p), Kind::kParam)].param = static_cast<int>(p);
    }
    for (size_t c = 0; c < body.num_constants(); ++c) {
      values[add_value(body.constant(c), Kind::kConst)].constant = body.constant(c);
    }

    // The iteration shape: the reductions' input, else the elementwise output shape.
    const std::vector<ir::Node*> order = body.topological_order();
    for (const ir::Node* node : order) {
      const ir::OpDef* def = node->def();
      MF_CHECK(def != nullptr, InvalidArgument, "fused body @", body.name(), ": op '", node->op(),
               "' is not registered");
      if (def->has(Trait::kReduce)) {
        MF_CHECK(def->reduce.has_value(), InvalidArgument, "op '", node->op(),
                 "' gives no row math (ReduceMath) the fused kernel could run");
        const ir::Shape& in = node->input(0).type().shape;
        MF_CHECK(reduces == 0 || in == shape, InvalidArgument, "reductions of fused body @",
                 body.name(), " read different shapes ", shape_text(shape), " and ",
                 shape_text(in));
        shape = in;
        ++reduces;
      } else if (def->has(Trait::kElementwise) && def->elementwise.has_value()) {
        if (reduces == 0 && shape.empty()) shape = node->output_type().shape;
        if (reduces == 0 && ir::num_elements(node->output_type().shape) > ir::num_elements(shape)) {
          shape = node->output_type().shape;
        }
      } else {
        MF_FAIL(InvalidArgument, "op '", node->op(),
                "' is neither elementwise nor a reduction; a fused kernel cannot run it");
      }
    }
    n = ir::num_elements(shape);
    if (reduces > 0) split_rows(body);
    rows = n / std::max<int64_t>(cols, 1);
    if (reduces == 0) rows = n, cols = 1;

    for (const ir::Node* node : order) {
      OpInfo op;
      op.node = node;
      const ir::OpDef* def = node->def();
      for (const ir::Value& v : node->inputs()) op.inputs.push_back(id.at(v));
      MF_CHECK(node->num_outputs() == 1, InvalidArgument, "op '", node->op(),
               "' has several outputs; a fused kernel runs single-output ops");
      const ir::TensorType& out = node->output_type();
      if (def->has(Trait::kReduce)) {
        op.kind = Kind::kReduce;
        op.reduce = def->reduce->for_dtype(out.dtype);
        MF_CHECK(op.reduce != nullptr, InvalidArgument, "op '", node->op(),
                 "' has no row math for ", ir::dtype_name(out.dtype));
      } else {
        op.tile = def->elementwise->for_dtype(node->inputs().back().type().dtype);
        MF_CHECK(op.tile != nullptr, InvalidArgument, "op '", node->op(), "' has no tile math for ",
                 ir::dtype_name(node->inputs().back().type().dtype));
        if (out.shape == shape) {
          op.kind = Kind::kFull;
        } else if (reduces > 0 && row_compatible(out.shape)) {
          op.kind = Kind::kRow;
        } else {
          MF_FAIL(InvalidArgument, "op '", node->op(), "' produces ", shape_text(out.shape),
                  ", neither the iteration shape ", shape_text(shape),
                  reduces > 0 ? " nor one value per row" : "");
        }
      }
      op.output = add_value(ir::Value(const_cast<ir::Node*>(node), 0), op.kind);
      max_arity = std::max(max_arity, op.inputs.size());
      ops.push_back(std::move(op));
    }
    for (const ir::Value& v : body.outputs()) outputs.push_back(id.at(v));
    MF_CHECK(!outputs.empty(), InvalidArgument, "fused body @", body.name(), " returns nothing");

    classify_inputs();
    assign_stages(body);
    assign_homes();
    // Chunk starts: a multiple of 16 elements (r0 * C) where that costs little, so tiles of
    // full-shape operands start aligned. With reductions a chunk is a few rows: its buffers
    // (values read by a reduce or a later stage) then stay in L1/L2 between the stages.
    const int64_t row_align = kAlignElements / std::gcd(cols, kAlignElements);
    const int64_t rows_wanted = std::max<int64_t>(1, kStitchChunkElements / cols);
    stream_outputs =
        reduces == 0 && n * static_cast<int64_t>(values[outputs[0]].elem) >= kStreamMinBytes;
    rows_per_chunk = reduces == 0               ? kChunkElements
                     : row_align <= rows_wanted ? round_up(rows_wanted, row_align)
                                                : rows_wanted;
    jit = compile_jit();
  }

  // The body as generated code, or nullptr when some part of it is beyond the generator: a
  // reduction, a dtype other than float32, an input broadcast along some axes, an op with no
  // one-instruction packet math.
  std::unique_ptr<FusedJit> compile_jit() {
    if (reduces > 0) return nullptr;
    for (const ValueInfo& v : values) {
      if (v.type.dtype != ir::DType::kFloat32) return nullptr;
    }
    JitProgram program;
    program.num_values = static_cast<int>(values.size());
    std::vector<bool> read(values.size(), false);
    for (const OpInfo& op : ops) {
      for (int in : op.inputs) read[in] = true;
    }
    for (int out : outputs) read[out] = true;
    for (size_t id = 0; id < values.size(); ++id) {
      const ValueInfo& v = values[id];
      if ((v.kind != Kind::kParam && v.kind != Kind::kConst) || !read[id]) continue;
      if (!v.full && !v.scalar) return nullptr;
      program.inputs.push_back({static_cast<int>(id), !v.full});
      jit_inputs.push_back(static_cast<int>(id));
    }
    for (const OpInfo& op : ops) {
      if (op.node->op() == "clip" && op.kind == Kind::kFull && op.inputs.size() == 3) {
        // clip's tile math is maximum then minimum: the same two instructions, through a value
        // of the program's own.
        const int lower = program.num_values++;
        program.steps.push_back({JitOp::kMaximum, op.inputs[0], op.inputs[1], lower});
        program.steps.push_back({JitOp::kMinimum, lower, op.inputs[2], op.output});
        continue;
      }
      const std::optional<JitOp> code = jit_op_for(op.node->op());
      if (!code || op.kind != Kind::kFull || !op.node->attrs().empty()) return nullptr;
      const bool unary = is_unary(*code);
      if (op.inputs.size() != (unary ? 1u : 2u)) return nullptr;
      program.steps.push_back({*code, op.inputs[0], unary ? -1 : op.inputs[1], op.output});
    }
    for (int out : outputs) {
      const ValueInfo& v = values[out];
      if ((v.kind == Kind::kParam || v.kind == Kind::kConst) && !v.full) return nullptr;
      program.outputs.push_back(out);
    }
    program.stream_outputs = stream_outputs;
    return FusedJit::compile(program);
  }

  void run_jit(const ir::KernelContext& ctx, int64_t e0, int64_t e1) const {
    constexpr size_t kInline = 16;
    const void* in_small[kInline];
    void* out_small[kInline];
    std::vector<const void*> in_big;
    std::vector<void*> out_big;
    const void** in = in_small;
    void** out = out_small;
    if (jit_inputs.size() > kInline) in_big.resize(jit_inputs.size()), in = in_big.data();
    if (outputs.size() > kInline) out_big.resize(outputs.size()), out = out_big.data();
    for (size_t k = 0; k < jit_inputs.size(); ++k) in[k] = input_data(values[jit_inputs[k]], ctx);
    for (size_t k = 0; k < outputs.size(); ++k) out[k] = ctx.outputs[k].data;
    jit->run(in, out, e0, e1);
  }

  // R x C: the reductions reduce the same trailing axes (size-1 axes aside) of `shape`.
  void split_rows(const ir::Graph& body) {
    const int64_t rank = static_cast<int64_t>(shape.size());
    int64_t first = -1;
    for (const ir::Node& node : body.nodes()) {
      if (!node.def()->has(Trait::kReduce)) continue;
      const std::vector<int64_t>& axes = ir::attr_ints(node.attrs(), "axes", node.op());
      std::vector<bool> reduced(rank, axes.empty());
      for (int64_t a : axes) reduced[ir::normalize_axis(a, rank, node.op())] = true;
      // First axis of the trailing reduced block (size-1 axes may be either).
      int64_t start = rank;
      while (start > 0 && (reduced[start - 1] || shape[start - 1] == 1)) --start;
      for (int64_t d = 0; d < start; ++d) {
        MF_CHECK(!reduced[d] || shape[d] == 1, InvalidArgument, "op '", node.op(),
                 "' reduces axes that are not trailing; the fused kernel reduces whole rows");
      }
      MF_CHECK(first < 0 || first == start, InvalidArgument, "the reductions of fused body @",
               body.name(), " reduce different axes");
      first = start;
    }
    cols = ir::num_elements(ir::Shape(shape.begin() + first, shape.end()));
    row_shape = ir::Shape(shape.begin(), shape.begin() + first);
    MF_CHECK(cols > 1, InvalidArgument, "the reductions of fused body @", body.name(),
             " reduce nothing (rows of one element)");
    MF_CHECK(n > 0, InvalidArgument, "fused body @", body.name(), " reduces an empty tensor");
    for (const ir::Node& node : body.nodes()) {
      if (!node.def()->has(Trait::kReduce)) continue;
      const int64_t limit = node.def()->reduce->single_row_limit;
      MF_CHECK(n / cols > 1 || limit == 0 || cols <= limit, InvalidArgument, "op '", node.op(),
               "' reduces one row of ", cols, " elements, which its kernel splits into blocks of ",
               limit, "; it is not fused");
    }
  }

  // A shape whose elements are one per row and which broadcasts along the rows.
  bool row_compatible(const ir::Shape& s) const {
    if (s.size() > shape.size()) return false;
    const size_t lead = shape.size() - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      const size_t d = lead + i;
      if (d >= row_shape.size()) {
        if (s[i] != 1) return false;
      } else if (s[i] != shape[d] && s[i] != 1) {
        return false;
      }
    }
    return ir::num_elements(s) == ir::num_elements(row_shape) || ir::num_elements(s) == 1;
  }

  void classify_inputs() {
    for (ValueInfo& v : values) {
      if (v.kind != Kind::kParam && v.kind != Kind::kConst) continue;
      v.full = v.type.shape == shape;
      v.scalar = ir::num_elements(v.type.shape) == 1;
      MF_CHECK(v.type.shape.size() <= shape.size(), InvalidArgument, "fused body input ",
               shape_text(v.type.shape), " does not broadcast to ", shape_text(shape));
      v.view = ops::StridedView{nullptr, shape, ops::broadcast_strides(v.type.shape, shape)};
      if (reduces > 0 && row_compatible(v.type.shape)) {
        // Drop the trailing size-1 axes that line up with the reduced axes.
        const size_t lead = shape.size() - v.type.shape.size();
        ir::Shape kept;
        for (size_t i = 0; i < v.type.shape.size(); ++i) {
          if (lead + i < row_shape.size()) kept.push_back(v.type.shape[i]);
        }
        v.row_view = ops::StridedView{nullptr, row_shape, ops::broadcast_strides(kept, row_shape)};
        v.row_ok = true;
      }
      ops::collapse_axes({&v.view});
    }
  }

  void assign_stages(const ir::Graph& body) {
    int last = 0;
    for (OpInfo& op : ops) {
      int ready = 0;
      for (int in : op.inputs) ready = std::max(ready, values[in].stage);
      ValueInfo& out = values[op.output];
      switch (op.kind) {
        case Kind::kFull:
        case Kind::kRow:
          op.stage = ready;
          out.stage = ready;
          break;
        case Kind::kReduce: {
          const ValueInfo& in = values[op.inputs[0]];
          MF_CHECK(in.kind == Kind::kFull ||
                       ((in.kind == Kind::kParam || in.kind == Kind::kConst) && in.full),
                   InvalidArgument, "a reduction of fused body @", body.name(),
                   " reads a value that is not of the iteration shape");
          op.stage = ready;
          out.stage = ready + 1;
          break;
        }
        default:
          break;
      }
      if (op.kind == Kind::kRow) {
        for (int in : op.inputs) {
          const ValueInfo& v = values[in];
          MF_CHECK(v.kind == Kind::kRow || v.kind == Kind::kReduce || v.row_ok, InvalidArgument,
                   "op '", op.node->op(), "' of fused body @", body.name(),
                   " mixes per-row values with values of the iteration shape");
        }
      }
      last = std::max(last, out.stage);
    }
    stages = last + 1;
  }

  void assign_homes() {
    // Body outputs first: the first output a value feeds is its home; repeats are copied.
    output_owner.assign(outputs.size(), -1);
    for (size_t k = 0; k < outputs.size(); ++k) {
      ValueInfo& v = values[outputs[k]];
      if (v.kind == Kind::kParam || v.kind == Kind::kConst) continue;
      if (v.output < 0) {
        v.output = static_cast<int>(k);
        if (v.kind == Kind::kFull) v.home = Home::kOutput;
      } else {
        output_owner[k] = v.output;
      }
    }
    std::vector<std::vector<const OpInfo*>> readers(values.size());
    for (const OpInfo& op : ops) {
      for (int in : op.inputs) readers[in].push_back(&op);
    }
    // Per-row values: one row buffer each.
    for (const OpInfo& op : ops) {
      if (op.kind == Kind::kRow || op.kind == Kind::kReduce) {
        values[op.output].home = Home::kRowBuffer;
        values[op.output].index = row_buffers++;
      }
    }
    // Full values in the order run() computes them (stage, then topological order): a chunk
    // buffer when a reduce or a later stage reads them, else a tile slot recycled after its last
    // reader.
    std::vector<size_t> tile_order;
    for (int s = 0; s < stages; ++s) {
      for (size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].kind == Kind::kFull && ops[i].stage == s) tile_order.push_back(i);
      }
    }
    std::vector<int> position(ops.size(), -1);
    for (size_t p = 0; p < tile_order.size(); ++p) position[tile_order[p]] = static_cast<int>(p);
    std::vector<std::vector<int>> releases(tile_order.size());
    std::vector<int> free_slots;
    for (size_t p = 0; p < tile_order.size(); ++p) {
      const OpInfo& op = ops[tile_order[p]];
      ValueInfo& v = values[op.output];
      if (v.home != Home::kOutput) {
        bool chunk = false;
        int last = -1;
        for (const OpInfo* r : readers[op.output]) {
          if (r->kind != Kind::kFull || r->stage != op.stage) chunk = true;
          if (r->kind == Kind::kFull) last = std::max(last, position[r - ops.data()]);
        }
        if (chunk) {
          v.home = Home::kChunk;
          v.index = chunk_buffers++;
          chunk_elem.push_back(v.elem);
        } else {
          v.home = Home::kTileSlot;
          if (free_slots.empty()) {
            v.index = tile_slots++;
          } else {
            v.index = free_slots.back();
            free_slots.pop_back();
          }
          if (last < 0) {
            free_slots.push_back(v.index);  // nothing reads it
          } else {
            releases[last].push_back(v.index);
          }
        }
      }
      // After op p has run, the slots it read for the last time are free again.
      for (int slot : releases[p]) free_slots.push_back(slot);
    }
  }

  // ---- running ----

  struct Run {
    const ir::KernelContext& ctx;
    int64_t r0, r1, e0, e1;
    Scratch scratch;
    size_t chunk0 = 0, tile0 = 0, row0 = 0, gather0 = 0, rowgather0 = 0, stream0 = 0;
  };

  const void* input_data(const ValueInfo& v, const ir::KernelContext& ctx) const {
    return v.kind == Kind::kParam ? ctx.inputs[v.param].data
                                  : static_cast<const void*>(v.constant->bytes().data());
  }

  char* home_of(const ValueInfo& v, Run& run, int64_t t0) const {
    switch (v.home) {
      case Home::kOutput:
        if (stream_outputs) return run.scratch.at(run.stream0 + v.output);
        return static_cast<char*>(run.ctx.outputs[v.output].data) + t0 * v.elem;
      case Home::kChunk:
        return run.scratch.at(run.chunk0 + v.index) + (t0 - run.e0) * v.elem;
      case Home::kTileSlot:
        return run.scratch.at(run.tile0 + v.index);
      case Home::kRowBuffer:
        return run.scratch.at(run.row0 + v.index);
      case Home::kInput:
        break;
    }
    MF_FAIL(Internal, "fused kernel: value has no home");
  }

  // Operand `v` of a tile [t0, t0 + len) of the iteration space. Sets `*scalar` when the pointer
  // is to one value standing for the whole tile (a scalar input, or a per-row value of a tile
  // within one row): the tile math then broadcasts it without a buffer.
  const void* tile_operand(int id, Run& run, int64_t t0, int64_t len, size_t k,
                           bool* scalar) const {
    const ValueInfo& v = values[id];
    *scalar = false;
    switch (v.kind) {
      case Kind::kParam:
      case Kind::kConst: {
        const char* data = static_cast<const char*>(input_data(v, run.ctx));
        if (v.full) return data + t0 * v.elem;
        if (v.scalar) {
          *scalar = true;
          return data;
        }
        char* buffer = run.scratch.at(run.gather0 + k);
        ops::StridedView view = v.view;
        view.data = data;
        ops::gather(view, v.elem, t0, len, buffer);
        return buffer;
      }
      case Kind::kFull:
        return home_of(v, run, t0);
      case Kind::kRow:
      case Kind::kReduce: {
        // One value per row, repeated along the row.
        const char* row = run.scratch.at(run.row0 + v.index);
        const int64_t first_row = t0 / cols;
        if ((t0 + len - 1) / cols == first_row) {
          *scalar = true;
          return row + (first_row - run.r0) * v.elem;
        }
        char* buffer = run.scratch.at(run.gather0 + k);
        int64_t i = t0;
        while (i < t0 + len) {
          const int64_t r = i / cols;
          const int64_t end = std::min(t0 + len, (r + 1) * cols);
          fill_value(buffer + (i - t0) * v.elem, row + (r - run.r0) * v.elem, v.elem, end - i);
          i = end;
        }
        return buffer;
      }
    }
    return nullptr;
  }

  // Operand `v` of a per-row op over the chunk's rows.
  const void* row_operand(int id, Run& run, size_t k) const {
    const ValueInfo& v = values[id];
    if (v.kind == Kind::kRow || v.kind == Kind::kReduce) return run.scratch.at(run.row0 + v.index);
    char* buffer = run.scratch.at(run.rowgather0 + k);
    ops::StridedView view = v.row_view;
    view.data = input_data(v, run.ctx);
    ops::gather(view, v.elem, run.r0, run.r1 - run.r0, buffer);
    return buffer;
  }

  void run_chunk(const ir::KernelContext& ctx, int64_t r0, int64_t r1) const {
    if (jit) return run_jit(ctx, r0, std::min(n, r1));  // elementwise: a row is an element
    Run run{ctx, r0, r1, r0 * cols, std::min(n, r1 * cols), {}};
    const int64_t chunk_elems = run.e1 - run.e0;
    const int64_t chunk_rows = r1 - r0;
    // Buffers: chunk, tile slots, rows, gathers (tile), gathers (rows).
    run.chunk0 = 0;
    for (int i = 0; i < chunk_buffers; ++i) run.scratch.add(chunk_elems * chunk_elem[i]);
    run.tile0 = chunk_buffers;
    for (int i = 0; i < tile_slots; ++i) run.scratch.add(kTile * kMaxElem);
    run.row0 = run.tile0 + tile_slots;
    for (int i = 0; i < row_buffers; ++i) run.scratch.add(chunk_rows * kMaxElem);
    run.gather0 = run.row0 + row_buffers;
    for (size_t i = 0; i < max_arity; ++i) run.scratch.add(kTile * kMaxElem);
    run.rowgather0 = run.gather0 + max_arity;
    for (size_t i = 0; i < max_arity; ++i)
      run.scratch.add(std::max<int64_t>(chunk_rows, 1) * kMaxElem);
    run.stream0 = run.rowgather0 + max_arity;
    if (stream_outputs) {
      for (size_t i = 0; i < outputs.size(); ++i) run.scratch.add(kTile * kMaxElem);
    }
    run.scratch.allocate();

    std::vector<const void*> args(max_arity);
    for (int s = 0; s < stages; ++s) {
      // Per-row ops that become ready at this stage.
      for (const OpInfo& op : ops) {
        if (op.kind != Kind::kRow || op.stage != s) continue;
        for (size_t k = 0; k < op.inputs.size(); ++k) args[k] = row_operand(op.inputs[k], run, k);
        op.tile(args.data(), 0, home_of(values[op.output], run, 0), chunk_rows);
      }
      // Elementwise ops of this stage, tile by tile.
      bool any = false;
      for (const OpInfo& op : ops) any = any || (op.kind == Kind::kFull && op.stage == s);
      if (any) {
        for (int64_t t0 = run.e0, len = 0; t0 < run.e1; t0 += len) {
          len = std::min(kTile, run.e1 - t0);
          // Tiles of long rows end at row ends, so per-row values are one scalar per tile.
          if (reduces > 0 && cols >= kMinRowTile) len = std::min(len, cols - t0 % cols);
          for (const OpInfo& op : ops) {
            if (op.kind != Kind::kFull || op.stage != s) continue;
            uint32_t scalars = 0;
            for (size_t k = 0; k < op.inputs.size(); ++k) {
              bool scalar = false;
              args[k] = tile_operand(op.inputs[k], run, t0, len, k, &scalar);
              if (scalar) scalars |= 1u << k;
            }
            op.tile(args.data(), scalars, home_of(values[op.output], run, t0), len);
          }
          if (stream_outputs) stream_tile(run, t0, len);
        }
      }
      // Reductions over this stage's values, row by row.
      for (const OpInfo& op : ops) {
        if (op.kind != Kind::kReduce || op.stage != s) continue;
        const ValueInfo& in = values[op.inputs[0]];
        const char* base = in.kind == Kind::kFull
                               ? home_of(in, run, run.e0)
                               : static_cast<const char*>(input_data(in, ctx)) + run.e0 * in.elem;
        char* out = home_of(values[op.output], run, 0);
        const size_t out_elem = values[op.output].elem;
        for (int64_t r = r0; r < r1; ++r) {
          op.reduce(base + (r - r0) * cols * in.elem, cols, out + (r - r0) * out_elem);
        }
      }
    }
    if (stream_outputs) stream_fence();
    write_outputs(run);
  }

  // The tile [t0, t0 + len) of each output computed into its tile buffer, streamed to memory.
  void stream_tile(Run& run, int64_t t0, int64_t len) const {
    for (size_t k = 0; k < outputs.size(); ++k) {
      const ValueInfo& v = values[outputs[k]];
      if (v.home != Home::kOutput || v.output != static_cast<int>(k)) continue;
      stream_copy(static_cast<char*>(run.ctx.outputs[k].data) + t0 * v.elem,
                  run.scratch.at(run.stream0 + k), len * v.elem);
    }
  }

  void write_outputs(Run& run) const {
    for (size_t k = 0; k < outputs.size(); ++k) {
      const ValueInfo& v = values[outputs[k]];
      const ir::TensorView& target = run.ctx.outputs[k];
      char* out = static_cast<char*>(target.data);
      if (v.kind == Kind::kRow || v.kind == Kind::kReduce) {
        if (target.size() == rows) {
          std::memcpy(out + run.r0 * v.elem, home_of(v, run, 0), (run.r1 - run.r0) * v.elem);
        } else if (run.r0 == 0) {
          std::memcpy(out, home_of(v, run, 0), v.elem);  // a scalar computed once per row
        }
        continue;
      }
      if (v.kind == Kind::kFull) {
        if (output_owner[k] < 0) continue;  // written in place
        const char* from = static_cast<const char*>(run.ctx.outputs[output_owner[k]].data);
        std::memcpy(out + run.e0 * v.elem, from + run.e0 * v.elem, (run.e1 - run.e0) * v.elem);
        continue;
      }
      // A parameter or constant returned as it is.
      const char* data = static_cast<const char*>(input_data(v, run.ctx));
      if (v.full) {
        std::memcpy(out + run.e0 * v.elem, data + run.e0 * v.elem, (run.e1 - run.e0) * v.elem);
      } else if (run.r0 == 0) {
        std::memcpy(out, data, target.size() * v.elem);
      }
    }
  }
};

FusedKernel::FusedKernel(const ir::Graph& body) : impl_(std::make_unique<Impl>(body)) {}
FusedKernel::~FusedKernel() = default;

void FusedKernel::run(const ir::KernelContext& ctx) const {
  const Impl& impl = *impl_;
  MF_CHECK(ctx.outputs.size() == impl.outputs.size(), Internal,
           "fused kernel: ", ctx.outputs.size(), " outputs given, the body returns ",
           impl.outputs.size());
  if (impl.n == 0) return;
  parallel_for(impl.rows, impl.rows_per_chunk,
               [&](int64_t r0, int64_t r1) { impl.run_chunk(ctx, r0, r1); });
}

std::string FusedKernel::describe() const {
  const Impl& impl = *impl_;
  if (impl.reduces == 0) {
    if (impl.jit) {
      return detail::str_cat("elementwise over ", shape_text(impl.shape), ", ", impl.ops.size(),
                             " ops, generated code (", impl.jit->code_bytes(),
                             " bytes, every value in a register)");
    }
    return detail::str_cat("elementwise over ", shape_text(impl.shape), ", ", impl.ops.size(),
                           " ops, ", impl.tile_slots, " tile buffers");
  }
  return detail::str_cat("rows ", impl.rows, " x ", impl.cols, ", ", impl.ops.size(), " ops, ",
                         impl.reduces, " reductions, ", impl.stages, " stages");
}

std::string FusedKernel::unsupported(const ir::Graph& body) {
  try {
    Impl impl(body);
  } catch (const Error& e) {
    return e.message();
  }
  return {};
}

std::shared_ptr<const FusedKernel> make_fused_kernel(const ir::Graph& owner, const ir::Node& node) {
  const std::string& name = ir::attr_string(node.attrs(), "graph", node.op());
  const ir::Graph* body = owner.resolve_subgraph(name);
  MF_CHECK(body != nullptr, NotFound, "fused node names body @", name, ", which does not exist");
  try {
    return std::make_shared<const FusedKernel>(*body);
  } catch (Error& e) {
    e.add_context("while building the fused kernel of body @" + name);
    throw;
  }
}

FusedKernels::FusedKernels(const Plan& plan) {
  for (const Step& step : plan.steps) {
    if (is_fused(*step.node)) kernels_[step.node] = make_fused_kernel(*plan.graph, *step.node);
  }
}

const FusedKernel& FusedKernels::get(const ir::Graph& owner, const ir::Node& node) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = kernels_.find(&node);
  if (it == kernels_.end()) it = kernels_.emplace(&node, make_fused_kernel(owner, node)).first;
  return *it->second;
}

namespace {

// The fused op: a body subgraph run as one kernel. Output types come from the body (as for call),
// so graphs build it with Graph::create_node; the executors run it through FusedKernel.
const ir::OpRegistration kFused =
    ir::define_op("fused")
        .inputs(0, -1)
        .outputs(-1)
        .attr("graph", ir::AttrKind::kString, std::nullopt,
              "the body subgraph: its parameters are the inputs, its outputs the outputs")
        .traits(Trait::kControlFlow | Trait::kFused | Trait::kOpaque | Trait::kPure)
        .infer(
            [](std::span<const ir::TensorType>, const ir::Attrs&) -> std::vector<ir::TensorType> {
              MF_FAIL(InvalidArgument,
                      "op 'fused' takes its output types from its body subgraph; build it with "
                      "Graph::create_node stating the output types");
            })
        .kernel([](const ir::KernelContext&) {
          MF_FAIL(Internal,
                  "op 'fused' is run by the graph executors through the fused-kernel evaluator, "
                  "not as a plain kernel");
        })
        .doc(
            "a graph-kernel fusion: the body subgraph named by 'graph' evaluated as one kernel, "
            "tile by tile");

}  // namespace

}  // namespace mf::runtime
