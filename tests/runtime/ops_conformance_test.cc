// One test walks the op registry: every op, every sample, every dtype the op accepts. The kernel
// must match the op's double-precision reference within its tolerance, produce the shapes inference
// promised, give the same bits on one thread as on many, and (for elementwise ops) agree bit for
// bit with the fused-kernel evaluator running the op as a one-op fused body.
//
// Negative controls prove the harness can fail: deliberately broken copies of a real op (a wrong
// value, bits that depend on the thread count, an inferred shape the reference does not compute)
// must each make it report a failure.
//
// Nothing here names an op: adding an op to runtime/ops/ adds its cases.

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>

#include "base/error.h"
#include "ir/graph.h"
#include "ir/op_def.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/fused_kernel.h"
#include "runtime/kernels/print_sink.h"
#include "runtime/parallel.h"
#include "tests/runtime/ops_test_util.h"

namespace mf::runtime::ops {
namespace {

using ir::DType;
using ir::OpDef;
using ir::TensorType;
using testing::HostTensor;

struct Case {
  const OpDef* op;
  size_t sample;
};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const OpDef* op : ir::all_ops()) {
    for (size_t i = 0; i < op->samples.size(); ++i) cases.push_back({op, i});
  }
  return cases;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.op->name + "_" + std::to_string(info.param.sample);
}

// Random values of the right kind for `dtype`, drawn from the sample's range.
std::vector<double> random_values(const TensorType& type, const ir::OpSample& s,
                                  std::mt19937_64& rng) {
  const int64_t n = ir::num_elements(type.shape);
  std::vector<double> values(n);
  std::uniform_real_distribution<double> real(s.input_low, s.input_high);
  for (double& v : values) {
    switch (type.dtype) {
      case DType::kFloat32:
      case DType::kFloat64:
        v = real(rng);
        break;
      case DType::kInt32:
      case DType::kInt64:
        v = std::round(5.0 * real(rng));
        break;
      case DType::kBool:
        v = (rng() & 1) ? 1.0 : 0.0;
        break;
    }
  }
  return values;
}

struct KernelRun {
  std::vector<HostTensor> outputs;
};

KernelRun run_kernel(const OpDef& op, std::vector<HostTensor>& inputs,
                     const std::vector<TensorType>& out_types, const ir::Attrs& attrs,
                     bool deterministic = true) {
  KernelRun run;
  for (const TensorType& t : out_types) run.outputs.emplace_back(t);
  std::vector<ir::TensorView> in_views, out_views;
  for (HostTensor& t : inputs) in_views.push_back(t.view());
  for (HostTensor& t : run.outputs) out_views.push_back(t.view());
  const ir::KernelContext ctx{in_views, out_views, attrs, op.name, deterministic};
  op.kernel(ctx);
  return run;
}

// Every check of one op sample, reported through gtest failures (so a negative control can expect
// them). `op` may be a test-only copy of a registered op. With `may_refuse` (a derived sample the
// op need not accept) an InvalidArgument from inference for the sample's own types is not a
// failure. Returns how many dtypes ran.
int check_sample(const OpDef& op, const ir::OpSample& s, size_t sample, bool may_refuse) {
  std::seed_seq seed(op.name.begin(), op.name.end());
  std::mt19937_64 rng(seed);
  rng.discard(sample * 7919);

  // The sample's dtype is the one its first floating input has; the other dtypes are tried in its
  // place, and the op "claims" a dtype when inference accepts it.
  DType main_dtype = DType::kFloat32;
  for (const TensorType& t : s.inputs) {
    if (ir::is_floating(t.dtype)) {
      main_dtype = t.dtype;
      break;
    }
  }
  int runs = 0;
  for (DType dtype : ir::kAllDTypes) {
    std::vector<TensorType> types = s.inputs;
    bool changed = false;
    for (TensorType& t : types) {
      if (t.dtype == main_dtype && dtype != main_dtype) {
        t.dtype = dtype;
        changed = true;
      }
    }
    if (dtype != main_dtype && !changed) continue;
    SCOPED_TRACE(std::string("dtype ") + std::string(ir::dtype_name(dtype)));

    ir::Attrs attrs = s.attrs;
    std::vector<TensorType> out_types;
    try {
      out_types = op.infer_types(types, attrs);
    } catch (const Error& e) {
      // Refusing a dtype is fine, but only as a user error with a message; the sample's own dtype
      // must always be accepted.
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      if (dtype == main_dtype && !may_refuse) {
        ADD_FAILURE() << "the sample's own types are rejected: " << e.what();
        return runs;
      }
      continue;
    }

    std::vector<HostTensor> inputs;
    std::vector<ir::RefTensor> ref_inputs;
    for (const TensorType& t : types) {
      inputs.push_back(HostTensor::from_doubles(t, random_values(t, s, rng)));
      // The reference sees exactly the values the kernel sees.
      ref_inputs.push_back({t.shape, inputs.back().to_doubles()});
    }

    // The reference first: a kernel is never run on outputs of shapes the reference disputes.
    // A derived sample may be refused at run time too (an index into an axis made empty): by the
    // reference and the kernel alike, as an InvalidArgument.
    std::vector<ir::RefTensor> expected;
    try {
      expected = op.reference(ref_inputs, attrs);
    } catch (const Error& e) {
      if (!may_refuse || e.kind() != ErrorKind::kInvalidArgument) throw;
      // A result of no elements is never computed (ir/op_def.cc), so no check on the values
      // (an index into an empty axis) runs for it: nothing is read or written either way.
      bool empty_result = !out_types.empty();
      for (const TensorType& t : out_types) {
        empty_result = empty_result && ir::num_elements(t.shape) == 0;
      }
      if (empty_result) continue;
      std::vector<HostTensor> outputs;
      for (const TensorType& t : out_types) outputs.emplace_back(t);
      std::vector<ir::TensorView> in_views, out_views;
      for (HostTensor& t : inputs) in_views.push_back(t.view());
      for (HostTensor& t : outputs) out_views.push_back(t.view());
      try {
        op.kernel(ir::KernelContext{in_views, out_views, attrs, op.name, true});
        ADD_FAILURE() << "the reference refuses these inputs (" << e.what()
                      << ") but the kernel computed a result";
      } catch (const Error& kernel_error) {
        EXPECT_EQ(kernel_error.kind(), ErrorKind::kInvalidArgument) << kernel_error.what();
      }
      continue;
    }
    if (expected.size() != out_types.size()) {
      ADD_FAILURE() << "reference and inference disagree on outputs";
      return runs;
    }
    for (size_t o = 0; o < out_types.size(); ++o) {
      if (expected[o].shape != out_types[o].shape) {
        ADD_FAILURE() << "output " << o << ": inference says "
                      << ir::shape_to_string(out_types[o].shape) << ", reference computes "
                      << ir::shape_to_string(expected[o].shape);
        return runs;
      }
    }
    KernelRun parallel = run_kernel(op, inputs, out_types, attrs);
    KernelRun serial;
    {
      ScopedIntraOpThreads one(1);
      serial = run_kernel(op, inputs, out_types, attrs);
    }
    // deterministic=OFF may run other kernels (library primitives whose sums split by thread
    // count): their bits are free, their values are held to the same bound.
    KernelRun fast = run_kernel(op, inputs, out_types, attrs, false);
    const double tolerance = dtype == DType::kFloat64 ? std::min(op.tolerance, 1e-9) : op.tolerance;
    const auto expect_near_reference = [&](const HostTensor& got, size_t o) {
      const bool exact = !ir::is_floating(got.type.dtype);
      int reported = 0;
      for (int64_t i = 0; i < got.size() && reported < 5; ++i) {
        const double g = got.get(i), r = expected[o].values[i];
        if (std::isnan(g) && std::isnan(r)) continue;
        const double bound = exact ? 0.0 : tolerance * (1.0 + std::abs(r));
        if (!(std::abs(g - r) <= bound)) {
          ADD_FAILURE() << "element " << i << ": kernel " << g << ", reference " << r << " (bound "
                        << bound << ")";
          ++reported;
        }
      }
    };
    for (size_t o = 0; o < out_types.size(); ++o) {
      SCOPED_TRACE("output " + std::to_string(o));
      EXPECT_TRUE(parallel.outputs[o].same_bytes(serial.outputs[o]))
          << "one thread and many threads give different bits";
      expect_near_reference(parallel.outputs[o], o);
      SCOPED_TRACE("deterministic=OFF");
      expect_near_reference(fast.outputs[o], o);
    }

    // Fused and unfused results agree bit for bit: the fused-kernel evaluator (its own tiling,
    // per-thread buffers and chunking) runs the op as a one-op body over same-shaped operands.
    if (op.elementwise && out_types.size() == 1) {
      bool same_shapes = true;
      for (const HostTensor& t : inputs)
        same_shapes = same_shapes && t.type.shape == out_types[0].shape;
      if (same_shapes) {
        std::vector<const void*> ptrs;
        for (const HostTensor& t : inputs) ptrs.push_back(t.data());
        const ir::TileFn tile = op.elementwise->for_dtype(types.back().dtype);
        ir::Graph body("one_op_body");
        std::vector<ir::Value> params;
        for (size_t k = 0; k < types.size(); ++k) {
          params.push_back(body.add_parameter("in" + std::to_string(k), types[k]));
        }
        body.add_output(body.add_node(op.name, params, attrs));
        const std::string unsupported = FusedKernel::unsupported(body);
        EXPECT_EQ(unsupported, "") << "an elementwise op the fused-kernel evaluator cannot run";
        if (unsupported.empty()) {
          const FusedKernel fused(body);
          HostTensor fused_out(out_types[0]);
          std::vector<ir::TensorView> in_views, out_views{fused_out.view()};
          for (HostTensor& t : inputs) in_views.push_back(t.view());
          fused.run(ir::KernelContext{in_views, out_views, attrs, op.name, true});
          EXPECT_TRUE(fused_out.same_bytes(parallel.outputs[0]))
              << "the fused-kernel evaluator differs from the kernel";
        }
        // An operand given as one value (its scalar bit) equals that value copied n times.
        for (size_t k = 0; k < inputs.size(); ++k) {
          HostTensor repeated(inputs[k].type);
          for (int64_t i = 0; i < repeated.size(); ++i) repeated.set(i, inputs[k].get(0));
          std::vector<const void*> copied = ptrs;
          copied[k] = repeated.data();
          HostTensor want(out_types[0]), got(out_types[0]);
          tile(copied.data(), 0, want.data(), want.size());
          tile(ptrs.data(), 1u << k, got.data(), got.size());
          EXPECT_TRUE(got.same_bytes(want)) << "operand " << k << " as one value differs from it "
                                            << "repeated";
        }
      }
    }
    ++runs;
  }
  return runs;
}

void check_conformance(const OpDef& op, size_t sample) {
  EXPECT_GE(check_sample(op, op.samples[sample], sample, false), 1);
}

// Zero-sized variants of a sample: for each dimension of each input, that size set to 0 wherever
// it appears at the same distance from the last axis in any input (so operands that must agree,
// as a matmul's inner sizes or an add's, still agree). An empty dimension is an ordinary shape.
std::vector<ir::OpSample> zero_sized_variants(const ir::OpSample& s) {
  std::vector<ir::OpSample> out;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const ir::Shape& shape = s.inputs[i].shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] <= 1) continue;
      const size_t from_end = shape.size() - d;
      ir::OpSample v = s;
      for (TensorType& t : v.inputs) {
        if (t.shape.size() >= from_end && t.shape[t.shape.size() - from_end] == shape[d]) {
          t.shape[t.shape.size() - from_end] = 0;
        }
      }
      out.push_back(std::move(v));
    }
  }
  return out;
}

class OpConformance : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    // Keep print's output out of the test log.
    sink_ = std::make_unique<ScopedPrintSink>(
        [this](std::string_view, const ir::TensorView&) { ++prints_; });
  }
  std::unique_ptr<ScopedPrintSink> sink_;
  int prints_ = 0;
};

TEST_P(OpConformance, KernelMatchesReference) {
  check_conformance(*GetParam().op, GetParam().sample);
}

// Every op's sample, as a one-op graph, prints and parses back to the same text (and the parser's
// own inference agrees with the declared output types).
TEST_P(OpConformance, OneOpGraphPrintsAndParsesBack) {
  const OpDef& op = *GetParam().op;
  const ir::OpSample& s = op.samples[GetParam().sample];
  ir::Graph graph("one_op");
  std::vector<ir::Value> inputs;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    inputs.push_back(graph.add_parameter("in" + std::to_string(i), s.inputs[i]));
  }
  ir::Node* node = graph.add_node(op.name, inputs, s.attrs);
  for (size_t k = 0; k < node->num_outputs(); ++k) graph.add_output(node->output(k));
  for (ir::Detail detail : {ir::Detail::kCompact, ir::Detail::kNormal, ir::Detail::kFull}) {
    const std::string text = ir::print_graph(graph, {detail});
    std::unique_ptr<ir::Graph> parsed = ir::parse_graph(text, op.name + ".ir");
    EXPECT_EQ(ir::print_graph(*parsed, {detail}), text);
  }
}

// Every sample again with each dimension in turn made empty: the kernel computes its (empty, or for
// a reduction over an empty axis, filled) result as the reference does, without a fault, a hang or
// work proportional to anything but the bytes. An op may refuse a variant with InvalidArgument (a
// window larger than an empty input), but every op must accept some empty shape.
TEST_P(OpConformance, ZeroSizedShapesComputeTheirResults) {
  const OpDef& op = *GetParam().op;
  if (op.has(ir::Trait::kControlFlow)) return;
  const ir::OpSample& s = op.samples[GetParam().sample];
  int variants = 0, ran = 0;
  for (const ir::OpSample& v : zero_sized_variants(s)) {
    std::string shapes;
    for (const TensorType& t : v.inputs) shapes += ir::shape_to_string(t.shape) + " ";
    SCOPED_TRACE("inputs " + shapes);
    ++variants;
    ran += check_sample(op, v, GetParam().sample, true) > 0 ? 1 : 0;
  }
  // Samples of scalars and ones have no dimension to empty; the op's other samples do.
  if (variants > 0) RecordProperty("zero_sized_variants_run", ran);
}

TEST(OpRegistryConformance, EveryOpAcceptsSomeZeroSizedShape) {
  int ops = 0;
  for (const OpDef* op : ir::all_ops()) {
    if (op->has(ir::Trait::kControlFlow)) continue;
    bool accepted = false, any_variant = false;
    for (const ir::OpSample& s : op->samples) {
      // A sample that is itself empty (an input or a result of no elements) counts.
      try {
        ir::Attrs attrs = s.attrs;
        for (const TensorType& t : op->infer_types(s.inputs, attrs)) {
          accepted = accepted || ir::num_elements(t.shape) == 0;
        }
      } catch (const Error&) {
      }
      for (const TensorType& t : s.inputs) accepted = accepted || ir::num_elements(t.shape) == 0;
      for (const ir::OpSample& v : zero_sized_variants(s)) {
        any_variant = true;
        try {
          ir::Attrs attrs = v.attrs;
          op->infer_types(v.inputs, attrs);
          accepted = true;
        } catch (const Error&) {
        }
      }
    }
    if (!any_variant) continue;
    ++ops;
    EXPECT_TRUE(accepted) << op->name << " refuses every zero-sized variant of its samples";
  }
  EXPECT_GE(ops, 50);
}

INSTANTIATE_TEST_SUITE_P(Registry, OpConformance, ::testing::ValuesIn(all_cases()), case_name);

// An op cannot be added untested: everything the conformance test needs must be declared.
TEST(OpRegistryConformance, EveryOpIsComplete) {
  const std::vector<const OpDef*> ops = ir::all_ops();
  EXPECT_GE(ops.size(), 102u);  // an op lost from the registry fails here
  for (const OpDef* op : ops) {
    SCOPED_TRACE(op->name);
    // call/cond/while run subgraphs: the graph executors test them (graph_executor_test.cc).
    if (op->has(ir::Trait::kControlFlow)) continue;
    EXPECT_TRUE(static_cast<bool>(op->infer));
    EXPECT_TRUE(static_cast<bool>(op->kernel));
    EXPECT_TRUE(static_cast<bool>(op->reference));
    EXPECT_FALSE(op->samples.empty());
    EXPECT_FALSE(op->doc.empty());
    EXPECT_GT(op->tolerance, 0.0);
    if (op->has(ir::Trait::kElementwise)) {
      ASSERT_TRUE(op->elementwise.has_value()) << "elementwise ops must give their tile math";
      bool any = false;
      for (DType d : ir::kAllDTypes) any = any || op->elementwise->for_dtype(d) != nullptr;
      EXPECT_TRUE(any);
    }
    EXPECT_FALSE(op->has(ir::Trait::kPure) && op->has(ir::Trait::kSideEffect));
  }
}

// An element's result does not depend on where it sits: whole 64-element blocks, 16-element
// blocks and the padded last block all go through the same packet code, so a tensor computed from
// any offset (a tile start, a thread's chunk, a misaligned view) gives the same bits at each
// element. A path through the scalar functor instead (exp, tanh round differently) would show here.
TEST(OpRegistryConformance, TileMathDoesNotDependOnAnElementsPosition) {
  constexpr int64_t kN = 200;  // three 64-blocks and a partial block
  int checked = 0;
  for (const OpDef* op : ir::all_ops()) {
    if (!op->elementwise || op->min_inputs != op->max_inputs || op->min_inputs > 2) continue;
    for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
      const ir::TileFn tile = op->elementwise->for_dtype(dtype);
      if (tile == nullptr) continue;
      SCOPED_TRACE(op->name + " " + std::string(ir::dtype_name(dtype)));
      const int arity = op->min_inputs;
      std::vector<TensorType> types(arity, TensorType{dtype, {kN}});
      std::vector<TensorType> out_types;
      try {
        out_types = op->infer(types, ir::Attrs{});
      } catch (const Error&) {
        continue;  // needs attributes: not plain elementwise math
      }
      const size_t out_elem = ir::dtype_size(out_types.at(0).dtype);
      std::vector<HostTensor> inputs;
      std::mt19937 rng(7);
      std::uniform_real_distribution<double> value(0.05, 2.5);
      for (int k = 0; k < arity; ++k) {
        std::vector<double> values(kN);
        for (double& v : values) v = (rng() & 1 ? 1 : -1) * value(rng);
        inputs.push_back(HostTensor::from_doubles(types[k], values));
      }
      std::vector<char> full(kN * out_elem), part(kN * out_elem);
      std::vector<const void*> ptrs(arity);
      for (int k = 0; k < arity; ++k) ptrs[k] = inputs[k].data();
      tile(ptrs.data(), 0, full.data(), kN);
      for (int64_t offset : {1, 7, 15, 16, 17, 48, 63, 64, 65, 100, 150, 184, 190, 199}) {
        const size_t in_elem = ir::dtype_size(dtype);
        for (int k = 0; k < arity; ++k) {
          ptrs[k] = static_cast<const char*>(inputs[k].data()) + offset * in_elem;
        }
        tile(ptrs.data(), 0, part.data(), kN - offset);
        EXPECT_EQ(
            std::memcmp(part.data(), full.data() + offset * out_elem, (kN - offset) * out_elem), 0)
            << "computed from element " << offset << ", the results differ";
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

// Negative controls: broken copies of the registered "add" (its samples, reference and inference
// kept) must each make the harness fail, with the message that names the defect.
// The failure messages `check` reports, intercepted (they do not fail this test).
std::vector<std::string> failures_of(const std::function<void()>& check) {
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    check();
  }
  std::vector<std::string> messages;
  for (int i = 0; i < results.size(); ++i)
    messages.push_back(results.GetTestPartResult(i).message());
  return messages;
}

// Whether the harness reported a failure whose message contains `needle`.
::testing::AssertionResult harness_reports(const OpDef& op, const std::string& needle) {
  const std::vector<std::string> messages = failures_of([&] { check_conformance(op, 0); });
  for (const std::string& m : messages) {
    if (m.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  }
  auto result = ::testing::AssertionFailure()
                << "the broken op passed the harness: no failure mentions '" << needle << "' ("
                << messages.size() << " failures)";
  for (const std::string& m : messages) result << "\n  " << m;
  return result;
}

OpDef broken_add(ir::KernelFn kernel) {
  OpDef op = ir::get_op("add");
  op.kernel = std::move(kernel);
  return op;
}

TEST(OpConformanceNegativeControl, AWrongValueIsCaught) {
  static const OpDef op = broken_add([](const ir::KernelContext& ctx) {
    ir::get_op("add").kernel(ctx);
    // One element off by 1e-3 relative: beyond add's tolerance.
    if (ctx.outputs[0].type.dtype == DType::kFloat32) {
      static_cast<float*>(ctx.outputs[0].data)[0] *= 1.001f;
    } else if (ctx.outputs[0].type.dtype == DType::kFloat64) {
      static_cast<double*>(ctx.outputs[0].data)[0] *= 1.001;
    }
  });
  EXPECT_TRUE(harness_reports(op, "element 0: kernel"));
}

TEST(OpConformanceNegativeControl, ThreadDependentBitsAreCaught) {
  static const OpDef op = broken_add([](const ir::KernelContext& ctx) {
    ir::get_op("add").kernel(ctx);
    // The last bit of element 0 flips unless one thread runs: within tolerance, not bit-stable.
    if (intra_op_threads() != 1 && ctx.outputs[0].type.dtype == DType::kFloat32) {
      uint32_t bits;
      std::memcpy(&bits, ctx.outputs[0].data, 4);
      bits ^= 1;
      std::memcpy(ctx.outputs[0].data, &bits, 4);
    }
  });
  ScopedIntraOpThreads many(2);
  EXPECT_TRUE(harness_reports(op, "one thread and many threads"));
}

TEST(OpConformanceNegativeControl, ATileMathTheFusedEvaluatorDisagreesWithIsCaught) {
  // The kernel rounds differently from the op's tile math, which is what fused bodies run.
  static const OpDef op = broken_add([](const ir::KernelContext& ctx) {
    ir::get_op("add").kernel(ctx);
    if (ctx.outputs[0].type.dtype == DType::kFloat32) {
      float* y = static_cast<float*>(ctx.outputs[0].data);
      y[0] = std::nextafter(y[0], 1e30f);  // one ulp: within tolerance, not the same bits
    }
  });
  EXPECT_TRUE(harness_reports(op, "fused-kernel evaluator differs"));
}

TEST(OpConformanceNegativeControl, AnInferredShapeTheReferenceDoesNotComputeIsCaught) {
  static const OpDef op = [] {
    OpDef broken = ir::get_op("add");
    const ir::InferFn infer = broken.infer;
    broken.infer = [infer](std::span<const TensorType> inputs, const ir::Attrs& attrs) {
      std::vector<TensorType> out = infer(inputs, attrs);
      out[0].shape.push_back(1);  // one axis too many
      return out;
    };
    return broken;
  }();
  EXPECT_TRUE(harness_reports(op, "inference says"));
}

// The ops the issue asks for are all registered (the list lives only here and in the files).
TEST(OpRegistryConformance, IssueOpsAreRegistered) {
  for (const char* name : {"add",          "sub",         "mul",          "div",
                           "neg",          "abs",         "exp",          "log",
                           "sqrt",         "rsqrt",       "square",       "pow",
                           "maximum",      "minimum",     "relu",         "sigmoid",
                           "tanh",         "erf",         "gelu_tanh",    "gelu_erf",
                           "cast",         "select",      "equal",        "less",
                           "greater",      "matmul",      "batch_matmul", "bias_add",
                           "conv2d",       "max_pool2d",  "avg_pool2d",   "global_avg_pool",
                           "reduce_sum",   "reduce_mean", "reduce_max",   "reduce_min",
                           "softmax",      "log_softmax", "layer_norm",   "batch_norm",
                           "reshape",      "transpose",   "concat",       "split",
                           "slice",        "flatten",     "expand_dims",  "squeeze",
                           "broadcast_to", "fill",        "zeros",        "ones",
                           "print"}) {
    EXPECT_NE(ir::find_op(name), nullptr) << name;
  }
}

}  // namespace
}  // namespace mf::runtime::ops
