// matmul, batch_matmul, matmul_bias and bias_add. In float32 the products run on oneDNN's matmul
// primitive (runtime/dnnl/), plain row-major operands, transposes as strides, batch dims
// broadcasting as oneDNN's own (size-1 dims), created once per shape and thread count:
//  - by default, one primitive over the whole (batched) product, on runtime_num_threads OpenMP
//    threads. oneDNN may split the k reduction across threads for some shapes (its GEMM and brgemm
//    matmul do when m * n is small against k), so bits may change with the thread count.
//  - with `deterministic`, fixed blocks of output rows (chosen from the shape alone, as the Eigen
//    path below does), each run by a one-thread primitive, the blocks spread over the intra-op
//    threads: the reduction order never depends on the thread count.
// matmul_bias adds its bias after the product, so it rounds as matmul then add. float64 (which
// oneDNN's matmul lacks), and shapes oneDNN refuses, run on Eigen's GEMM over row-major Maps,
// split into the same fixed blocks of output rows.

#include <Eigen/Core>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "runtime/dnnl/engine.h"
#include "runtime/dnnl/prepare.h"
#include "runtime/dnnl/primitive_cache.h"
#include "runtime/dnnl/reorders.h"
#include "runtime/kernels/expand_util.h"
#include "runtime/kernels/gemv.h"
#include "runtime/kernels/grad_util.h"
#include "runtime/kernels/op_util.h"
#include "runtime/kernels/reference.h"
#include "runtime/parallel.h"

namespace mf::runtime::ops {
namespace {

using ir::Trait;

template <typename T>
using RowMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const RowMatrix<T>, 0, Eigen::OuterStride<>>;

// Multiply-adds per parallel block: enough that packing B once per block stays a small overhead.
constexpr int64_t kBlockMacs = int64_t{1} << 18;
constexpr int64_t kMinBlockRows = 16;
// At most this many row blocks per matrix: every block packs all of B again (Eigen packs the
// row-major product's B as its left operand), so 64 blocks of 16 rows spent as long packing B as
// multiplying (transformer: gemm_pack_lhs 35% of the run). Eight blocks still feed the threads.
constexpr int64_t kMaxRowBlocks = 8;

struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
  bool transpose_a = false, transpose_b = false;
};

// C[r0:r1, :] = op(A)[r0:r1, :] * op(B) for one matrix of a batch.
template <typename T>
void gemm_rows(const T* a, const T* b, T* c, const GemmShape& s, int64_t r0, int64_t r1) {
  const int64_t rows = r1 - r0;
  Eigen::Map<RowMatrix<T>> out(c + r0 * s.n, rows, s.n);
  auto multiply = [&](const auto& lhs) {
    if (s.transpose_b) {
      out.noalias() = lhs * ConstMatrixMap<T>(b, s.n, s.k, Eigen::OuterStride<>(s.k)).transpose();
    } else {
      out.noalias() = lhs * ConstMatrixMap<T>(b, s.k, s.n, Eigen::OuterStride<>(s.n));
    }
  };
  if (s.transpose_a) {
    // a is stored (k, m): the rows of op(A) we need are columns r0..r1 of a.
    multiply(ConstMatrixMap<T>(a + r0, s.k, rows, Eigen::OuterStride<>(s.m)).transpose());
  } else {
    multiply(ConstMatrixMap<T>(a + r0 * s.k, rows, s.k, Eigen::OuterStride<>(s.k)));
  }
}

// The checks shared by matmul and batch_matmul: dtype, then the product's (m, k, n) from the last
// two dims of each operand under the transpose flags.
GemmShape check_gemm(std::string_view op, const TensorType& a, const TensorType& b,
                     const Attrs& attrs) {
  check_dtype(op, a.dtype, kFloatTypes);
  MF_CHECK(a.dtype == b.dtype, InvalidArgument, op,
           ": input dtypes disagree: ", ir::dtype_name(a.dtype), " x ", ir::dtype_name(b.dtype),
           "; insert a cast");
  GemmShape s;
  s.transpose_a = ir::attr_bool(attrs, "transpose_a", op);
  s.transpose_b = ir::attr_bool(attrs, "transpose_b", op);
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t a_rows = a.shape[ra - 2], a_cols = a.shape[ra - 1];
  const int64_t b_rows = b.shape[rb - 2], b_cols = b.shape[rb - 1];
  s.m = s.transpose_a ? a_cols : a_rows;
  s.k = s.transpose_a ? a_rows : a_cols;
  const int64_t kb = s.transpose_b ? b_cols : b_rows;
  s.n = s.transpose_b ? b_rows : b_cols;
  MF_CHECK(s.k == kb, InvalidArgument, op,
           ": inner dimensions disagree: ", ir::shape_to_string(a.shape), " x ",
           ir::shape_to_string(b.shape), " with transpose_a=", s.transpose_a ? "true" : "false",
           ", transpose_b=", s.transpose_b ? "true" : "false", "; a's dim ",
           ra - (s.transpose_a ? 2 : 1), " (", s.k, ") must equal b's dim ",
           rb - (s.transpose_b ? 1 : 2), " (", kb, ")");
  return s;
}

std::vector<TensorType> infer_matmul(std::span<const TensorType> in, const Attrs& attrs) {
  MF_CHECK(in[0].shape.size() == 2 && in[1].shape.size() == 2, InvalidArgument,
           "matmul: both inputs must be matrices (rank 2), got ", ir::shape_to_string(in[0].shape),
           " x ", ir::shape_to_string(in[1].shape), "; use batch_matmul for stacks of matrices");
  const GemmShape s = check_gemm("matmul", in[0], in[1], attrs);
  return {{in[0].dtype, {s.m, s.n}}};
}

std::vector<TensorType> infer_batch_matmul(std::span<const TensorType> in, const Attrs& attrs) {
  MF_CHECK(in[0].shape.size() >= 2 && in[1].shape.size() >= 2, InvalidArgument,
           "batch_matmul: both inputs need rank >= 2 (..., rows, cols), got ",
           ir::shape_to_string(in[0].shape), " x ", ir::shape_to_string(in[1].shape));
  const GemmShape s = check_gemm("batch_matmul", in[0], in[1], attrs);
  const Shape batch_a(in[0].shape.begin(), in[0].shape.end() - 2);
  const Shape batch_b(in[1].shape.begin(), in[1].shape.end() - 2);
  Shape out = ir::broadcast_shapes(batch_a, batch_b, "batch_matmul (batch dimensions)");
  out.push_back(s.m);
  out.push_back(s.n);
  return {{in[0].dtype, out}};
}

// Offset (in matrices) of each output batch entry in a batch of shape `batch` broadcast to `out`.
std::vector<int64_t> batch_offsets(const Shape& batch, const Shape& out) {
  const int64_t count = ir::num_elements(out);
  std::vector<int64_t> offsets(count);
  const size_t lead = out.size() - batch.size();
  for (int64_t i = 0; i < count; ++i) {
    int64_t rest = i, offset = 0, scale = 1;
    for (size_t d = out.size(); d-- > 0;) {
      const int64_t coord = rest % out[d];
      rest /= out[d];
      if (d >= lead) {
        const int64_t size = batch[d - lead];
        if (size != 1) offset += coord * scale;
        scale *= size;
      }
    }
    offsets[i] = offset;
  }
  return offsets;
}

// matmul_bias: matmul's checks, then a bias of n values (shape (n) or (1, n)) of the same dtype.
std::vector<TensorType> infer_matmul_bias(std::span<const TensorType> in, const Attrs& attrs) {
  std::vector<TensorType> out = infer_matmul(in.first(2), attrs);
  const int64_t n = out[0].shape[1];
  const TensorType& bias = in[2];
  MF_CHECK(bias.dtype == in[0].dtype, InvalidArgument, "matmul_bias: the bias is ",
           ir::dtype_name(bias.dtype), ", the product ", ir::dtype_name(in[0].dtype),
           "; insert a cast");
  MF_CHECK(bias.shape == Shape{n} || bias.shape == Shape({1, n}), InvalidArgument,
           "matmul_bias: the bias must hold one value per output column, shape (", n, ") or (1, ",
           n, "), got ", ir::shape_to_string(bias.shape));
  return out;
}

// ---- oneDNN ----

struct DnnlMatmul {
  dnnl::matmul primitive;
  dnnl::memory::desc a, b, c, scratchpad;
  dnnl::memory::desc bias;    // zero when the primitive adds none
  dnnl::memory::desc user_b;  // b as stored (row-major, transposed by strides)
  dnnl::reorder b_in;         // user_b -> b when the primitive chose its own layout for b
};

using dnnl_dims = dnnl::memory::dims;

// op(X) for X stored row-major with shape `stored` (rank >= 2), as a rank-`rank` oneDNN descriptor
// (leading size-1 dims added, for oneDNN's batch broadcasting), the last two dims swapped by
// strides when `transpose`.
dnnl::memory::desc operand_desc(const Shape& stored, size_t rank, bool transpose) {
  const size_t r = stored.size();
  dnnl_dims dims(rank, 1), strides(rank, 0);
  int64_t stride = 1;
  for (size_t d = r; d-- > 0;) {
    dims[rank - r + d] = stored[d];
    strides[rank - r + d] = stride;
    stride *= stored[d];
  }
  for (size_t d = 0; d < rank - r; ++d) strides[d] = std::max<int64_t>(1, stride);
  if (transpose) {
    std::swap(dims[rank - 1], dims[rank - 2]);
    std::swap(strides[rank - 1], strides[rank - 2]);
  }
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

// `bias`, when not zero, is added by the primitive to the fp32 product before it is stored: the
// same single rounding as matmul then add, inside each block while it is in cache.
// With `b_own_layout`, the primitive picks b's layout (format "any") and b_in reorders the stored
// b into it: with plain weights oneDNN's brgemm matmul copies b into that layout inside every call
// (vit_b_32's 50x768 by 768x3072 product: 6.7 ms plain, 3.4 with b reordered once, one thread, with
// the same bits). Worth it only where the reorder is kept: weights whose bytes are known unchanged.
std::shared_ptr<const DnnlMatmul> create_matmul(const dnnl::memory::desc& a,
                                                const dnnl::memory::desc& b,
                                                const dnnl::memory::desc& c,
                                                const dnnl::memory::desc& bias = {},
                                                bool b_own_layout = false) {
  try {
    auto mm = std::make_shared<DnnlMatmul>();
    mm->a = a, mm->c = c, mm->bias = bias, mm->user_b = b;
    const dnnl::memory::desc b_any(b.dims(), dnnl::memory::data_type::f32,
                                   dnnl::memory::format_tag::any);
    const dnnl::memory::desc& b_wanted = b_own_layout ? b_any : b;
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::matmul::desc desc = bias.is_zero() ? dnnl::matmul::desc(a, b_wanted, c)
                                                   : dnnl::matmul::desc(a, b_wanted, bias, c);
    const dnnl::matmul::primitive_desc pd(desc, attr, dnnl_rt::cpu_engine());
    mm->primitive = dnnl::matmul(pd);
    mm->scratchpad = pd.scratchpad_desc();
    mm->b = pd.weights_desc();
    mm->b_in = dnnl_rt::make_reorder(b, mm->b);
    return mm;
  } catch (const dnnl::error&) {
    return nullptr;  // unimplemented: the Eigen path runs it
  }
}

// The whole (batched) product of float32 a and b under the transpose flags, for `threads`; with
// `bias`, one value per output column added by the primitive (matmul_bias).
// `b_own_layout`: as create_matmul's.
std::shared_ptr<const DnnlMatmul> dnnl_matmul_whole(const Shape& as, const Shape& bs,
                                                    const Shape& cs, bool ta, bool tb, int threads,
                                                    bool bias, bool b_own_layout) {
  dnnl_rt::PrimitiveKey key("matmul");
  key.add(std::span<const int64_t>(as))
      .add(std::span<const int64_t>(bs))
      .add({ta ? 1 : 0, tb ? 1 : 0, threads, bias ? 1 : 0, b_own_layout ? 1 : 0});
  return dnnl_rt::primitive_cache().get<DnnlMatmul>(key, [&] {
    const size_t rank = cs.size();
    dnnl::memory::desc bias_desc;
    if (bias) {
      dnnl_dims dims(rank, 1), strides(rank, cs.back());
      dims[rank - 1] = cs.back();
      strides[rank - 1] = 1;
      bias_desc = dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
    }
    return create_matmul(operand_desc(as, rank, ta), operand_desc(bs, rank, tb),
                         operand_desc(cs, rank, false), bias_desc, b_own_layout);
  });
}

// b's bytes in `mm`'s layout for b, in memory of their own.
dnnl::memory reorder_b(const DnnlMatmul& mm, const void* b) {
  return dnnl_rt::reordered_copy(mm.b_in, mm.user_b, mm.b, b);
}

// b with a content identity in `mm`'s layout, kept in reordered_weights_cache() until its bytes
// change; an empty memory where it is not worth it (b then runs plain). Worth it for bytes met
// again by this primitive, and for a parameter (TensorView::parameter) met for the first time. Not
// for other bytes met once: op by op every tensor has an identity, and an activation multiplied
// once (a gradient's dc) would cost a reorder and a kept copy for nothing (the transformer's
// PYNATIVE training step held 336 MiB of them). Nor for a new version of bytes met before: a weight
// rewritten at every training step would be reordered at every step (the mlp's GRAPH step went
// from 0.35x to 0.61x of PyTorch's time).
dnnl::memory reordered_b(const std::shared_ptr<const DnnlMatmul>& mm, const ir::TensorView& b) {
  const dnnl_rt::KeptBytes bytes{"matmul weights", b.content_id, b.content_version, mm};
  if (dnnl::memory kept = dnnl_rt::find_kept_copy(bytes)) return kept;
  // The bytes seen once, by identity: a bounded count of small entries.
  static dnnl_rt::PrimitiveCache* const seen = new dnnl_rt::PrimitiveCache(4096);
  dnnl_rt::PrimitiveKey key("matmul weights seen");
  key.add(static_cast<int64_t>(b.content_id))
      .add(static_cast<int64_t>(reinterpret_cast<intptr_t>(mm.get())));
  const bool met_before = seen->contains(key);
  bool first = false;
  seen->get_version<char>(key, b.content_version, [&] {
    first = true;
    return std::make_shared<const char>(0);
  });
  if (first && (met_before || !b.parameter)) return {};
  return dnnl_rt::kept_copy(bytes, mm->b_in, mm->user_b, mm->b, b.data);
}

// Whether b is one matrix (its batch dims all 1) that a product could keep in the primitive's own
// layout; whether it does depends on its bytes being known to stay (a content identity or a
// compiled constant).
bool b_is_one_matrix(const Shape& bs) {
  return ir::num_elements(bs) > 0 && ir::num_elements(bs) == bs[bs.size() - 1] * bs[bs.size() - 2];
}

// The shapes the whole-product primitive multiplies: a batch of a's over one matrix b is one
// product of all their rows (m grows, as brgemm likes, and b's layout is two-dimensional).
struct WholeShapes {
  Shape a, b, c;
};

WholeShapes whole_shapes(const Shape& as, const Shape& bs, const Shape& cs, bool transpose_a) {
  const int64_t n = cs.back(), k = transpose_a ? as[as.size() - 2] : as.back();
  const int64_t rows = ir::num_elements(cs) / std::max<int64_t>(1, n);
  // a holds every row (no batch dim broadcast): compared by division, so no product can overflow.
  if (cs.size() > 2 && !transpose_a && b_is_one_matrix(bs) && k > 0 &&
      ir::num_elements(as) % k == 0 && ir::num_elements(as) / k == rows) {
    return {{rows, k}, {bs[bs.size() - 2], bs.back()}, {rows, n}};
  }
  return {as, bs, cs};
}

// What a compiled graph keeps for a product whose b is one of its constants: the primitive and b
// in its layout, reordered once at compile time.
struct PreparedMatmul {
  std::shared_ptr<const DnnlMatmul> mm;
  int threads = 1;
  dnnl::memory b;
};

// One block of `rows` output rows of one matrix of the batch, on one thread: a is (m, k) stored
// (or (k, m) when ta), b (k, n) (or (n, k)), c (rows, n) inside (m, n).
std::shared_ptr<const DnnlMatmul> dnnl_matmul_block(const GemmShape& s, int64_t rows) {
  dnnl_rt::PrimitiveKey key("matmul_block");
  key.add({s.m, s.k, s.n, s.transpose_a ? 1 : 0, s.transpose_b ? 1 : 0, rows, 1});
  return dnnl_rt::primitive_cache().get<DnnlMatmul>(key, [&] {
    const auto f32 = dnnl::memory::data_type::f32;
    const dnnl::memory::desc a = s.transpose_a ? dnnl::memory::desc({rows, s.k}, f32, {1, s.m})
                                               : dnnl::memory::desc({rows, s.k}, f32, {s.k, 1});
    const dnnl::memory::desc b = s.transpose_b ? dnnl::memory::desc({s.k, s.n}, f32, {1, s.k})
                                               : dnnl::memory::desc({s.k, s.n}, f32, {s.n, 1});
    return create_matmul(a, b, dnnl::memory::desc({rows, s.n}, f32, {s.n, 1}));
  });
}

// `b` is the stored b, or (b_reordered) b already in the primitive's layout.
void run_matmul(const DnnlMatmul& mm, const void* a, const void* b, void* c,
                const void* bias = nullptr, const dnnl::memory* b_reordered = nullptr) {
  const dnnl::engine& engine = dnnl_rt::cpu_engine();
  dnnl::stream& stream = dnnl_rt::thread_stream();
  std::unordered_map<int, dnnl::memory> args = {
      {DNNL_ARG_SRC, dnnl::memory(mm.a, engine, const_cast<void*>(a))},
      {DNNL_ARG_WEIGHTS,
       b_reordered != nullptr ? *b_reordered : dnnl::memory(mm.b, engine, const_cast<void*>(b))},
      {DNNL_ARG_DST, dnnl::memory(mm.c, engine, c)}};
  if (!mm.bias.is_zero()) {
    args.emplace(DNNL_ARG_BIAS, dnnl::memory(mm.bias, engine, const_cast<void*>(bias)));
  }
  if (mm.scratchpad.get_size() > 0) {
    args.emplace(
        DNNL_ARG_SCRATCHPAD,
        dnnl::memory(mm.scratchpad, engine, dnnl_rt::thread_scratchpad(mm.scratchpad.get_size())));
  }
  mm.primitive.execute(stream, args);
  stream.wait();
}

// Row blocks: the shape decides them, never the thread count, so results are reproducible.
int64_t block_rows_for(const GemmShape& s) {
  return std::min(s.m, std::max({kMinBlockRows, kBlockMacs / std::max<int64_t>(1, s.k * s.n),
                                 (s.m + kMaxRowBlocks - 1) / kMaxRowBlocks}));
}

void add_bias_rows(float* c, const float* bias, int64_t rows, int64_t n) {
  Eigen::Map<RowMatrix<float>> block(c, rows, n);
  block.rowwise() += Eigen::Map<const Eigen::Matrix<float, 1, Eigen::Dynamic>>(bias, n);
}

// The float32 product on oneDNN; false when oneDNN refused the shapes (Eigen then runs it).
bool matmul_dnnl(const ir::KernelContext& ctx, const GemmShape& s, const Shape& out_batch,
                 const std::vector<int64_t>& a_off, const std::vector<int64_t>& b_off) {
  const TensorType& ta = ctx.inputs[0].type;
  const TensorType& tb = ctx.inputs[1].type;
  const TensorType& tc = ctx.outputs[0].type;
  const float* a = ctx.inputs[0].as<float>();
  const float* b = ctx.inputs[1].as<float>();
  const float* bias = ctx.inputs.size() > 2 ? ctx.inputs[2].as<float>() : nullptr;
  float* c = ctx.outputs[0].as<float>();
  const int64_t batches = ir::num_elements(out_batch);
  if (!ctx.deterministic) {
    const int threads = dnnl_rt::kernel_threads();
    dnnl_rt::ScopedOmpThreads omp(threads);
    const auto* prepared = static_cast<const PreparedMatmul*>(ctx.prepared);
    if (prepared != nullptr && prepared->threads == threads) {
      run_matmul(*prepared->mm, a, b, c, bias, &prepared->b);
      return true;
    }
    // Weights known unchanged and used again run in the primitive's layout for them, kept.
    const WholeShapes w = whole_shapes(ta.shape, tb.shape, tc.shape, s.transpose_a);
    std::shared_ptr<const DnnlMatmul> mm;
    if (ctx.inputs[1].content_id != 0 && b_is_one_matrix(tb.shape)) {
      mm = dnnl_matmul_whole(w.a, w.b, w.c, s.transpose_a, s.transpose_b, threads, bias != nullptr,
                             true);
      if (mm != nullptr && mm->b_in) {
        const dnnl::memory reordered = reordered_b(mm, ctx.inputs[1]);
        if (reordered) {
          run_matmul(*mm, a, b, c, bias, &reordered);
          return true;
        }
        mm = nullptr;
      }
    }
    if (mm == nullptr) {
      mm = dnnl_matmul_whole(w.a, w.b, w.c, s.transpose_a, s.transpose_b, threads, bias != nullptr,
                             false);
    }
    if (mm == nullptr) return false;
    run_matmul(*mm, a, b, c, bias);
    return true;
  }
  const int64_t block_rows = block_rows_for(s);
  const int64_t blocks_per_matrix = (s.m + block_rows - 1) / block_rows;
  const int64_t tail_rows = s.m - (blocks_per_matrix - 1) * block_rows;
  std::shared_ptr<const DnnlMatmul> full, tail;
  {
    dnnl_rt::ScopedOmpThreads omp(1);
    full = dnnl_matmul_block(s, block_rows);
    tail = tail_rows == block_rows ? full : dnnl_matmul_block(s, tail_rows);
  }
  if (full == nullptr || tail == nullptr) return false;
  parallel_for(batches * blocks_per_matrix, 1, [&](int64_t begin, int64_t end) {
    // One OpenMP thread: oneDNN runs each block inline on this thread (a parallel_for chunk).
    dnnl_rt::ScopedOmpThreads omp(1);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t batch = item / blocks_per_matrix;
      const int64_t r0 = (item % blocks_per_matrix) * block_rows;
      const int64_t rows = std::min(s.m, r0 + block_rows) - r0;
      const float* a_batch = a + a_off[batch] * s.m * s.k;
      float* c_block = c + (batch * s.m + r0) * s.n;
      run_matmul(rows == block_rows ? *full : *tail, a_batch + (s.transpose_a ? r0 : r0 * s.k),
                 b + b_off[batch] * s.k * s.n, c_block);
      if (bias != nullptr) add_bias_rows(c_block, bias, rows, s.n);
    }
  });
  return true;
}

// A product of one row by one matrix: gemv.h's kernel, not oneDNN's.
bool runs_gemv(const Shape& c) {
  return c.size() >= 2 && ir::num_elements(c) == c.back() && c[c.size() - 2] == 1;
}

void matmul_kernel(const ir::KernelContext& ctx) {
  const TensorType& ta = ctx.inputs[0].type;
  const TensorType& tb = ctx.inputs[1].type;
  const TensorType& tc = ctx.outputs[0].type;
  GemmShape s;
  s.transpose_a = ir::attr_bool(ctx.attrs, "transpose_a", ctx.op_name);
  s.transpose_b = ir::attr_bool(ctx.attrs, "transpose_b", ctx.op_name);
  s.m = tc.shape[tc.shape.size() - 2];
  s.n = tc.shape.back();
  s.k = s.transpose_a ? ta.shape[ta.shape.size() - 2] : ta.shape.back();
  const Shape out_batch(tc.shape.begin(), tc.shape.end() - 2);
  const std::vector<int64_t> a_off =
      batch_offsets(Shape(ta.shape.begin(), ta.shape.end() - 2), out_batch);
  const std::vector<int64_t> b_off =
      batch_offsets(Shape(tb.shape.begin(), tb.shape.end() - 2), out_batch);
  const int64_t batches = ir::num_elements(out_batch);
  if (s.m == 0 || s.n == 0 || batches == 0) return;
  // One row by a matrix (a classifier at batch 1): a pass over b (gemv.h says why).
  if (tc.dtype == DType::kFloat32 && runs_gemv(tc.shape) && s.k > 0) {
    return gemv_f32(ctx.inputs[0].as<float>(), ctx.inputs[1].as<float>(),
                    ctx.inputs.size() > 2 ? ctx.inputs[2].as<float>() : nullptr,
                    ctx.outputs[0].as<float>(), s.k, s.n, s.transpose_b);
  }
  // oneDNN multiplies float32 only (with k == 0 it would leave c unwritten): float64, and any
  // shape oneDNN refuses, keep the Eigen path.
  if (tc.dtype == DType::kFloat32 && s.k > 0 && matmul_dnnl(ctx, s, out_batch, a_off, b_off)) {
    return;
  }
  // Blocks depend on the shape alone, never on the thread count: results are reproducible.
  const int64_t block_rows = block_rows_for(s);
  const int64_t blocks_per_matrix = (s.m + block_rows - 1) / block_rows;
  ir::visit_dtype(tc.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      const T* a = ctx.inputs[0].as<T>();
      const T* b = ctx.inputs[1].as<T>();
      const T* bias = ctx.inputs.size() > 2 ? ctx.inputs[2].as<T>() : nullptr;
      T* c = ctx.outputs[0].as<T>();
      parallel_for(batches * blocks_per_matrix, 1, [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t batch = item / blocks_per_matrix;
          const int64_t r0 = (item % blocks_per_matrix) * block_rows;
          const int64_t r1 = std::min(s.m, r0 + block_rows);
          T* c_batch = c + batch * s.m * s.n;
          gemm_rows(a + a_off[batch] * s.m * s.k, b + b_off[batch] * s.k * s.n, c_batch, s, r0, r1);
          if (bias != nullptr) {
            // The epilogue, while the block is in cache: the product rounded, then the bias
            // added, as matmul followed by add round.
            Eigen::Map<RowMatrix<T>> block(c_batch + r0 * s.n, r1 - r0, s.n);
            block.rowwise() += Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>>(bias, s.n);
          }
        }
      });
    } else {
      MF_FAIL(Internal, ctx.op_name, ": no kernel for ", ir::dtype_name(tc.dtype));
    }
  });
}

// The reference: textbook triple loop per batch entry, with broadcasting batch dims.
std::vector<RefTensor> matmul_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  const bool ta = std::get<bool>(attrs.at("transpose_a"));
  const bool tb = std::get<bool>(attrs.at("transpose_b"));
  const RefTensor& a = in[0];
  const RefTensor& b = in[1];
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t m = ta ? a.shape[ra - 1] : a.shape[ra - 2];
  const int64_t k = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  const int64_t n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  const RefTensor batch_a{Shape(a.shape.begin(), a.shape.end() - 2), {}};
  const RefTensor batch_b{Shape(b.shape.begin(), b.shape.end() - 2), {}};
  const RefTensor batch_pair[] = {batch_a, batch_b};
  const Shape batch = ref_broadcast_shape(batch_pair);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  RefTensor out = ref_tensor(out_shape);
  for (int64_t bi = 0; bi < ir::num_elements(batch); ++bi) {
    const std::vector<int64_t> coord = ref_unravel(bi, batch);
    // The batch index of each operand under broadcasting.
    auto operand_batch = [&](const Shape& own) {
      std::vector<int64_t> c(own.size());
      for (size_t d = 0; d < own.size(); ++d) {
        c[d] = own[d] == 1 ? 0 : coord[coord.size() - own.size() + d];
      }
      return ref_ravel(c, own);
    };
    const int64_t ia = operand_batch(batch_a.shape), ib = operand_batch(batch_b.shape);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double av =
              ta ? a.values[ia * m * k + p * m + i] : a.values[ia * m * k + i * k + p];
          const double bv =
              tb ? b.values[ib * k * n + j * k + p] : b.values[ib * k * n + p * n + j];
          sum += av * bv;
        }
        out.values[(bi * m + i) * n + j] = sum;
      }
    }
  }
  return {out};
}

ir::Attrs transposes(bool a, bool b) {
  return {{"transpose_a", a}, {"transpose_b", b}};
}

// The backward of c = op(a) op(b) (op: the transpose flags) as two products of the same op, with
// dc and the other operand transposed as needed, so that no transpose is materialized:
//   (a, b):     da = dc b',   db = a' dc        (a', b'): da = b' dc',  db = dc' a'
//   (a', b):    da = b dc',   db = a dc         (a, b'):  da = dc b,    db = dc' a
// A batch operand that broadcast is summed back to its shape (reduce_to). matmul_bias adds the sum
// of dc over rows for its bias.
void matmul_backward(ir::GradBuilder& b) {
  // Rank-2 operands multiply as matmul whatever the forward op was.
  const bool matrices = b.input_type(0).shape.size() == 2 && b.input_type(1).shape.size() == 2;
  const std::string_view op = matrices ? "matmul" : "batch_matmul";
  const bool ta = ir::attr_bool(b.attrs(), "transpose_a", op);
  const bool tb = ir::attr_bool(b.attrs(), "transpose_b", op);
  const ir::GradValue dc = b.dout(0);
  auto product = [&](ir::GradValue x, ir::GradValue y, bool tx, bool ty) {
    return b.op(op, {x, y}, transposes(tx, ty));
  };
  if (b.wants_grad(0)) {
    const ir::GradValue rhs = b.input(1);
    const ir::GradValue da = ta ? product(rhs, dc, tb, true) : product(dc, rhs, false, !tb);
    b.set_grad(0, b.reduce_to(da, b.input_type(0).shape));
  }
  if (b.wants_grad(1)) {
    const ir::GradValue lhs = b.input(0);
    const ir::GradValue db = tb ? product(dc, lhs, true, ta) : product(lhs, dc, !ta, false);
    b.set_grad(1, b.reduce_to(db, b.input_type(1).shape));
  }
  if (b.num_inputs() == 3 && b.wants_grad(2)) {
    b.set_grad(2, b.reduce_to(dc, b.input_type(2).shape));
  }
}

const ir::OpRegistration kMatmul =
    ir::define_op("matmul")
        .arity(2)
        .attr("transpose_a", ir::AttrKind::kBool, false, "use a's transpose")
        .attr("transpose_b", ir::AttrKind::kBool, false, "use b's transpose")
        .traits(Trait::kOpaque | Trait::kPure)
        .infer(infer_matmul)
        .kernel(matmul_kernel)
        .reference(matmul_reference)
        .samples({
            sample({f32({3, 4}), f32({4, 5})}, transposes(false, false)),
            sample({f32({4, 3}), f32({4, 5})}, transposes(true, false)),
            sample({f32({3, 4}), f32({5, 4})}, transposes(false, true)),
            sample({f32({4, 3}), f32({5, 4})}, transposes(true, true)),
            sample({f32({1, 7}), f32({7, 1})}, transposes(false, false)),
            // Several row blocks in parallel.
            sample({f32({130, 256}), f32({256, 64})}, transposes(false, false)),
            sample({f32({256, 130}), f32({64, 256})}, transposes(true, true)),
            // A long k against a small m * n; a row vector.
            sample({f32({4, 3000}), f32({3000, 5})}, transposes(false, false)),
            sample({f32({1, 96}), f32({80, 96})}, transposes(false, true)),
            // One row by a matrix (gemv.cc): k and n off the 16-lane blocks, rows of b four at a
            // time and their tail, b stored (k, n) or (n, k), a stored as a column, several
            // chunks of outputs.
            sample({f32({1, 37}), f32({37, 21})}, transposes(false, false)),
            sample({f32({1, 37}), f32({23, 37})}, transposes(false, true)),
            sample({f32({37, 1}), f32({37, 70})}, transposes(true, false)),
            sample({f32({1, 300}), f32({203, 300})}, transposes(false, true)),
        })
        .tolerance(1e-4)
        .doc("matrix product of two rank-2 tensors: (m, k) x (k, n) -> (m, n)")
        .backward({.inputs = 0b11}, matmul_backward);

std::vector<RefTensor> matmul_bias_reference(std::span<const RefTensor> in, const Attrs& attrs) {
  std::vector<RefTensor> out = matmul_reference(in.first(2), attrs);
  const int64_t n = out[0].shape[1];
  for (size_t i = 0; i < out[0].values.size(); ++i) out[0].values[i] += in[2].values[i % n];
  return out;
}

// What matmul-epilogue fusion (opt_level 2) makes of a matmul whose only user adds a bias row.
const ir::OpRegistration kMatmulBias =
    ir::define_op("matmul_bias")
        .arity(3)
        .attr("transpose_a", ir::AttrKind::kBool, false, "use a's transpose")
        .attr("transpose_b", ir::AttrKind::kBool, false, "use b's transpose")
        .traits(Trait::kOpaque | Trait::kPure)
        .infer(infer_matmul_bias)
        .kernel(matmul_kernel)
        .reference(matmul_bias_reference)
        .samples({
            sample({f32({3, 4}), f32({4, 5}), f32({5})}, transposes(false, false)),
            sample({f32({4, 3}), f32({5, 4}), f32({1, 5})}, transposes(true, true)),
            // Several row blocks in parallel.
            sample({f32({130, 256}), f32({64, 256}), f32({64})}, transposes(false, true)),
            // One row (gemv.cc), the bias after the product.
            sample({f32({1, 40}), f32({75, 40}), f32({75})}, transposes(false, true)),
            sample({f32({1, 40}), f32({40, 75}), f32({1, 75})}, transposes(false, false)),
        })
        .tolerance(1e-4)
        .doc(
            "matmul(a, b) + bias, the bias one value per output column, added to each row block "
            "while it is in cache; rounds as matmul then add")
        .backward({.inputs = 0b11}, matmul_backward);

const ir::OpRegistration kBatchMatmul =
    ir::define_op("batch_matmul")
        .arity(2)
        .attr("transpose_a", ir::AttrKind::kBool, false, "transpose a's last two dims")
        .attr("transpose_b", ir::AttrKind::kBool, false, "transpose b's last two dims")
        .traits(Trait::kOpaque | Trait::kPure)
        .infer(infer_batch_matmul)
        .kernel(matmul_kernel)
        .reference(matmul_reference)
        .samples({
            sample({f32({2, 3, 4}), f32({2, 4, 5})}, transposes(false, false)),
            sample({f32({2, 4, 3}), f32({1, 5, 4})}, transposes(true, true)),
            sample({f32({3, 1, 2, 4}), f32({2, 4, 6})}, transposes(false, false)),
            sample({f32({4, 3}), f32({2, 4, 5})}, transposes(true, false)),
            sample({f32({2, 4, 16, 8}), f32({2, 4, 16, 8})}, transposes(false, true)),
            // Broadcasting on both sides, odd sizes, transposed a.
            sample({f32({2, 1, 3, 9, 5}), f32({4, 1, 9, 7})}, transposes(true, false)),
            sample({f32({3, 33, 17}), f32({17, 19})}, transposes(false, false)),
        })
        .tolerance(1e-4)
        .doc("matrix product over the last two dims; leading (batch) dims broadcast numpy-style")
        .backward({.inputs = 0b11}, matmul_backward);

// The primitive matmul_kernel runs for float32 inputs in the default (non-deterministic) mode.
// Deterministic runs use one-thread primitives per fixed row block, made at their first run.
dnnl_rt::Prepared prepare_matmul(std::string_view op, const dnnl_rt::PrepareRequest& request) {
  std::span<const TensorType> in = request.inputs;
  if (in[0].dtype != DType::kFloat32 || request.deterministic) return {};
  Attrs filled = request.attrs;
  const std::vector<TensorType> out = ir::get_op(op).infer_types(in, filled);
  const GemmShape s = check_gemm(op, in[0], in[1], filled);
  if (s.k == 0 || runs_gemv(out[0].shape)) return {};
  const bool bias = op == "matmul_bias";
  const WholeShapes w = whole_shapes(in[0].shape, in[1].shape, out[0].shape, s.transpose_a);
  const void* b = request.constant(1);
  if (b_is_one_matrix(in[1].shape)) {
    // Made for a b bound with a content identity (a parameter) too: the kernel asks for it then.
    std::shared_ptr<const DnnlMatmul> mm =
        dnnl_matmul_whole(w.a, w.b, w.c, s.transpose_a, s.transpose_b, request.threads, bias, true);
    if (b != nullptr && mm != nullptr && mm->b_in) {
      auto state = std::make_shared<PreparedMatmul>();
      state->b = reorder_b(*mm, b);
      state->mm = std::move(mm);
      state->threads = request.threads;
      return {true, std::shared_ptr<const PreparedMatmul>(state)};
    }
  }
  return {dnnl_matmul_whole(w.a, w.b, w.c, s.transpose_a, s.transpose_b, request.threads, bias,
                            false) != nullptr,
          nullptr};
}

const dnnl_rt::PreparerRegistration kPrepareMatmul("matmul", [](const dnnl_rt::PrepareRequest& r) {
  return prepare_matmul("matmul", r);
});
const dnnl_rt::PreparerRegistration kPrepareMatmulBias("matmul_bias",
                                                       [](const dnnl_rt::PrepareRequest& r) {
                                                         return prepare_matmul("matmul_bias", r);
                                                       });
const dnnl_rt::PreparerRegistration kPrepareBatchMatmul("batch_matmul",
                                                        [](const dnnl_rt::PrepareRequest& r) {
                                                          return prepare_matmul("batch_matmul", r);
                                                        });

// bias_add(x, bias) {axis}: x + bias along one axis of x (the feature axis, last by default; 1 for
// NCHW activations).
std::vector<TensorType> infer_bias_add(std::span<const TensorType> in, const Attrs& attrs) {
  check_dtype("bias_add", in[0].dtype, kFloatTypes);
  common_dtype("bias_add", in);
  MF_CHECK(!in[0].shape.empty(), InvalidArgument, "bias_add: x must have rank >= 1, got a scalar");
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(attrs, "axis", "bias_add"), rank_of(in[0]), "bias_add");
  MF_CHECK(in[1].shape.size() == 1 && in[1].shape[0] == in[0].shape[axis], InvalidArgument,
           "bias_add: bias must have shape (", in[0].shape[axis], ") to match axis ", axis,
           " of x ", ir::shape_to_string(in[0].shape), ", got ", ir::shape_to_string(in[1].shape));
  return {in[0]};
}

// bias_add as an add broadcasting the bias along its axis: always exact.
std::vector<ir::Value> expand_bias_add(ir::Graph& graph, ir::Node& node, bool) {
  Expansion e(graph, node);
  const int64_t rank = static_cast<int64_t>(e.input_type(0).shape.size());
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(e.attrs(), "axis", node.op()), rank, node.op());
  return {e.op("add", {e.input(0), e.along_axis(e.input(1), axis, rank)})};
}

void bias_add_kernel(const ir::KernelContext& ctx) {
  const Shape& shape = ctx.inputs[0].type.shape;
  const int64_t axis =
      ir::normalize_axis(ir::attr_int(ctx.attrs, "axis", ctx.op_name), shape.size(), ctx.op_name);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t channels = shape[axis];
  ir::visit_dtype(shape.empty() ? DType::kFloat32 : ctx.inputs[0].type.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
      const T* x = ctx.inputs[0].as<T>();
      const T* bias = ctx.inputs[1].as<T>();
      T* y = ctx.outputs[0].as<T>();
      const int64_t row = channels * inner;
      const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / std::max<int64_t>(1, row));
      parallel_for(outer, grain, [&](int64_t begin, int64_t end) {
        const Eigen::Map<const Array> b(bias, channels);
        for (int64_t o = begin; o < end; ++o) {
          if (inner == 1) {
            Eigen::Map<Array>(y + o * row, channels) =
                Eigen::Map<const Array>(x + o * row, channels) + b;
            continue;
          }
          for (int64_t c = 0; c < channels; ++c) {
            const int64_t at = o * row + c * inner;
            Eigen::Map<Array>(y + at, inner) = Eigen::Map<const Array>(x + at, inner) + b[c];
          }
        }
      });
    } else {
      MF_FAIL(Internal, ctx.op_name, ": no kernel for ", ir::dtype_name(ctx.inputs[0].type.dtype));
    }
  });
}

const ir::OpRegistration kBiasAdd =
    ir::define_op("bias_add")
        .arity(2)
        .attr("axis", ir::AttrKind::kInt, int64_t{-1}, "the axis of x that bias runs along")
        // In place: each element of x is read once, at the index it is written to.
        .traits(Trait::kPure | Trait::kComposite | Trait::kInPlace)
        .infer(infer_bias_add)
        .kernel(bias_add_kernel)
        .expander(expand_bias_add)
        .reference([](std::span<const RefTensor> in, const Attrs& attrs) {
          const Shape& shape = in[0].shape;
          const int64_t rank = static_cast<int64_t>(shape.size());
          int64_t axis = std::get<int64_t>(attrs.at("axis"));
          if (axis < 0) axis += rank;
          RefTensor out = in[0];
          for (int64_t i = 0; i < static_cast<int64_t>(out.values.size()); ++i) {
            out.values[i] += in[1].values[ref_unravel(i, shape)[axis]];
          }
          return std::vector<RefTensor>{out};
        })
        .samples({
            sample({f32({4, 5}), f32({5})}),
            sample({f32({2, 3, 4}), f32({4})}),
            sample({f32({2, 3, 4, 5}), f32({3})}, {{"axis", int64_t{1}}}),
            sample({f32({6}), f32({6})}),
        })
        .doc("x + bias along `axis` of x (expands to reshape + add)")
        .backward({}, [](ir::GradBuilder& b) {
          if (b.wants_grad(0)) b.set_grad(0, b.dout(0));
          if (!b.wants_grad(1)) return;
          const int64_t rank = static_cast<int64_t>(b.input_type(0).shape.size());
          const int64_t axis =
              ir::normalize_axis(ir::attr_int(b.attrs(), "axis", "bias_add"), rank, "bias_add");
          std::vector<int64_t> others;
          for (int64_t d = 0; d < rank; ++d) {
            if (d != axis) others.push_back(d);
          }
          b.set_grad(1, sum_over(b, b.dout(0), others, false));
        });

}  // namespace
}  // namespace mf::runtime::ops
