// Generated code for fused elementwise bodies (runtime/fused_jit.h) against the tile evaluator,
// which itself agrees with the plain kernels bit for bit (fused_kernel_test.cc): random bodies of
// every covered op over values that probe each instruction's corner cases (NaN, signed zeros,
// infinities, denormals), full and scalar inputs, outputs that are inputs, tails of every length,
// outputs in the inputs' memory, 1-3 threads. Bodies beyond the generator run on the evaluator.

#include "runtime/fused_jit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "base/error.h"
#include "ir/graph.h"
#include "ir/printer.h"
#include "runtime/fused_kernel.h"
#include "runtime/parallel.h"

namespace mf::runtime {
namespace {

using ir::DType;
using ir::Graph;
using ir::TensorType;

// Restores the generator's switch when a test ends.
class JitSwitch {
 public:
  JitSwitch() : was_(fused_jit_enabled()) {}
  ~JitSwitch() { set_fused_jit_enabled(was_); }

 private:
  bool was_;
};

bool generator_available() {
  JitProgram p;
  p.num_values = 2;
  p.inputs = {{0, false}};
  p.steps = {{JitOp::kNeg, 0, -1, 1}};
  p.outputs = {1};
  return FusedJit::compile(p) != nullptr;
}

std::vector<float> probe_values(int64_t n, uint32_t seed) {
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            -1.0f,
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::min() / 3,
                            std::numeric_limits<float>::max(),
                            1e-30f};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> out(n);
  for (float& v : out) v = rng() % 4 == 0 ? specials[rng() % std::size(specials)] : dist(rng);
  return out;
}

std::string numbered(const char* prefix, int i) {
  return std::string(prefix).append(std::to_string(i));
}

// A random body over `full` full-shape parameters of n elements and `scalar` scalar parameters,
// with a scalar constant, `steps` ops drawn from everything the generator covers (clip included;
// each with a
// full-shape operand, as fusion forms them), and up to four outputs: the last result, another one,
// a parameter as it is, a repeat.
std::unique_ptr<Graph> random_body(int64_t n, int full, int scalar, int steps, uint32_t seed) {
  static const char* kBinary[] = {"add", "sub", "mul", "div", "maximum", "minimum"};
  static const char* kUnary[] = {"neg", "abs", "relu", "square"};
  std::mt19937 rng(seed);
  auto g = std::make_unique<Graph>("body");
  std::vector<ir::Value> fulls, all;
  for (int i = 0; i < full; ++i) {
    fulls.push_back(g->add_parameter(numbered("x", i), {DType::kFloat32, {n}}));
  }
  all = fulls;
  for (int i = 0; i < scalar; ++i) {
    all.push_back(g->add_parameter(numbered("s", i), {DType::kFloat32, {}}));
  }
  all.push_back(g->add_constant<float>({}, {0.75f}));
  for (int s = 0; s < steps; ++s) {
    const ir::Value a = fulls[rng() % fulls.size()];
    ir::Value v;
    if (rng() % 3 == 0) {
      v = g->add_node(kUnary[rng() % std::size(kUnary)], {a});
    } else if (rng() % 6 == 0) {
      // clip: generated as maximum then minimum through a value of the program's own.
      v = g->add_node("clip", {a, all[rng() % all.size()], all[rng() % all.size()]});
    } else {
      ir::Value b = all[rng() % all.size()];
      v = rng() % 2 ? g->add_node(kBinary[rng() % std::size(kBinary)], {a, b})
                    : g->add_node(kBinary[rng() % std::size(kBinary)], {b, a});
    }
    fulls.push_back(v);
    all.push_back(v);
  }
  g->add_output(fulls.back());
  if (rng() % 2) g->add_output(fulls[full + rng() % steps]);
  if (rng() % 3 == 0) g->add_output(fulls[0]);  // a parameter returned as it is
  if (rng() % 3 == 0) g->add_output(fulls.back());
  return g;
}

struct Buffers {
  std::vector<std::vector<float>> inputs, outputs;
};

// Runs `body` with its outputs written to 64-byte-aligned memory shifted by `output_shift` floats
// (1 keeps large outputs off the streaming-store path), copied back into the result.
Buffers run_body(const Graph& body, bool generated, const std::vector<std::vector<float>>& inputs,
                 int threads, size_t output_shift = 0) {
  set_fused_jit_enabled(generated);
  const FusedKernel kernel(body);
  EXPECT_EQ(kernel.describe().find("generated code") != std::string::npos, generated)
      << kernel.describe();
  Buffers b;
  b.inputs = inputs;
  std::vector<ir::TensorView> in, out;
  for (size_t p = 0; p < body.num_parameters(); ++p) {
    in.push_back({b.inputs[p].data(), body.parameter(p)->type()});
  }
  std::vector<std::vector<float>> storage;
  for (const ir::Value& v : body.outputs()) {
    const size_t n = ir::num_elements(v.type().shape);
    storage.emplace_back(n + 16 + output_shift, 12345.0f);
    auto at = reinterpret_cast<uintptr_t>(storage.back().data());
    float* aligned = reinterpret_cast<float*>((at + 63) / 64 * 64) + output_shift;
    out.push_back({aligned, v.type()});
  }
  const ir::Attrs attrs;
  const ScopedIntraOpThreads scope(threads);
  kernel.run(ir::KernelContext{in, out, attrs, "fused", false});
  for (size_t k = 0; k < out.size(); ++k) {
    const float* data = out[k].as<float>();
    b.outputs.emplace_back(data, data + out[k].size());
  }
  return b;
}

// The same bits, except that two NaNs may differ in payload and sign: a NaN from two NaN operands
// of add or mul carries either operand's, as the compiler orders the operands of a commutative
// instruction (the tile functions themselves differ there between their 64- and 16-element loops).
void expect_same_bits(const Buffers& a, const Buffers& b, const std::string& what) {
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t k = 0; k < a.outputs.size(); ++k) {
    ASSERT_EQ(a.outputs[k].size(), b.outputs[k].size());
    for (size_t i = 0; i < a.outputs[k].size(); ++i) {
      if (std::isnan(a.outputs[k][i]) && std::isnan(b.outputs[k][i])) continue;
      ASSERT_EQ(std::memcmp(&a.outputs[k][i], &b.outputs[k][i], sizeof(float)), 0)
          << what << ": output " << k << " element " << i << ": generated " << a.outputs[k][i]
          << ", evaluator " << b.outputs[k][i];
    }
  }
}

TEST(FusedJitTest, RandomBodiesGiveTheEvaluatorsBits) {
  if (!generator_available()) GTEST_SKIP() << "no code generator in this build or on this CPU";
  JitSwitch restore;
  int bodies = 0;
  for (int64_t n : {1, 15, 16, 17, 33, 100, 1000, 70001}) {
    for (uint32_t seed = 1; seed <= 12; ++seed) {
      const int full = 1 + seed % 3, scalar = seed % 2, steps = 3 + seed % 9;
      const std::unique_ptr<Graph> body = random_body(n, full, scalar, steps, seed * 131 + n);
      std::vector<std::vector<float>> inputs;
      for (size_t p = 0; p < body->num_parameters(); ++p) {
        inputs.push_back(
            probe_values(ir::num_elements(body->parameter(p)->type().shape), seed + 17 * p));
      }
      const std::string what = "n " + std::to_string(n) + ", seed " + std::to_string(seed) +
                               ", body\n" + ir::print_graph(*body);
      const Buffers want = run_body(*body, false, inputs, 1);
      for (int threads : {1, 3}) {
        expect_same_bits(run_body(*body, true, inputs, threads), want, what);
      }
      ++bodies;
    }
  }
  EXPECT_EQ(bodies, 96);
}

// Outputs of 8 MiB and more leave whole packets with streaming stores when every output of a chunk
// starts 64-byte aligned, and with plain stores when not: the same bits either way.
TEST(FusedJitTest, LargeOutputsStreamedOrNotGiveTheEvaluatorsBits) {
  if (!generator_available()) GTEST_SKIP() << "no code generator in this build or on this CPU";
  JitSwitch restore;
  const int64_t n = 2 * 1024 * 1024 + 37;
  for (uint32_t seed : {3u, 8u}) {
    const std::unique_ptr<Graph> body = random_body(n, 2, 1, 6, seed);
    std::vector<std::vector<float>> inputs;
    for (size_t p = 0; p < body->num_parameters(); ++p) {
      inputs.push_back(
          probe_values(ir::num_elements(body->parameter(p)->type().shape), seed + 5 * p));
    }
    const Buffers want = run_body(*body, false, inputs, 1);
    for (size_t shift : {0u, 1u}) {
      expect_same_bits(run_body(*body, true, inputs, 2, shift), want,
                       "shift " + std::to_string(shift) + "\n" + ir::print_graph(*body));
    }
  }
}

// An output may be given the memory of a full input (the memory planner's in-place reuse): each
// packet reads all its inputs before it stores.
TEST(FusedJitTest, AnOutputInAnInputsMemoryReadsBeforeItWrites) {
  if (!generator_available()) GTEST_SKIP() << "no code generator in this build or on this CPU";
  JitSwitch restore;
  const int64_t n = 1037;
  Graph body("body");
  ir::Value x = body.add_parameter("x", {DType::kFloat32, {n}});
  ir::Value y = body.add_parameter("y", {DType::kFloat32, {n}});
  body.add_output(body.add_node("sub", {body.add_node("mul", {x, y}), body.add_node("abs", {x})}));
  const std::vector<float> xs = probe_values(n, 3), ys = probe_values(n, 4);
  const Buffers want = run_body(body, false, {xs, ys}, 1);

  set_fused_jit_enabled(true);
  const FusedKernel kernel(body);
  std::vector<float> x_then_out = xs, y_copy = ys;
  const std::vector<ir::TensorView> in = {{x_then_out.data(), x.type()}, {y_copy.data(), y.type()}};
  const std::vector<ir::TensorView> out = {{x_then_out.data(), x.type()}};
  const ir::Attrs attrs;
  kernel.run(ir::KernelContext{in, out, attrs, "fused", false});
  Buffers got;
  got.outputs = {x_then_out};
  expect_same_bits(got, want, "in place");
}

// More values alive at once than vector registers: the evaluator runs the body, with its bits.
TEST(FusedJitTest, BodiesNeedingMoreThanTheRegistersFallBackToTheEvaluator) {
  JitSwitch restore;
  const int64_t n = 300;
  Graph body("body");
  std::vector<ir::Value> xs;
  for (int i = 0; i < 40; ++i) {
    xs.push_back(body.add_parameter(numbered("x", i), {DType::kFloat32, {n}}));
  }
  ir::Value sum = xs[0];
  for (int i = 1; i < 40; ++i) sum = body.add_node("add", {sum, xs[i]});
  body.add_output(sum);
  set_fused_jit_enabled(true);
  const FusedKernel kernel(body);
  EXPECT_EQ(kernel.describe().find("generated code"), std::string::npos) << kernel.describe();
  std::vector<std::vector<float>> inputs;
  for (int i = 0; i < 40; ++i) inputs.push_back(probe_values(n, 100 + i));
  set_fused_jit_enabled(false);
  const Buffers want = run_body(body, false, inputs, 1);
  // Built with the generator on, run: the same bits (the evaluator ran it).
  std::vector<ir::TensorView> in, out;
  Buffers got;
  got.inputs = inputs;
  for (int i = 0; i < 40; ++i) in.push_back({got.inputs[i].data(), xs[i].type()});
  got.outputs.emplace_back(n, 0.0f);
  out.push_back({got.outputs[0].data(), sum.type()});
  const ir::Attrs attrs;
  kernel.run(ir::KernelContext{in, out, attrs, "fused", false});
  expect_same_bits(got, want, "40 live inputs");
}

TEST(FusedJitTest, OnlyOneInstructionOpsOverFloat32AreCovered) {
  for (const char* op :
       {"add", "sub", "mul", "div", "maximum", "minimum", "neg", "abs", "relu", "square"}) {
    EXPECT_TRUE(jit_op_for(op).has_value()) << op;
  }
  // Eigen computes these through several instructions (or approximations): not generated.
  for (const char* op : {"exp", "tanh", "sigmoid", "sqrt", "rsqrt", "pow", "select", "cast"}) {
    EXPECT_FALSE(jit_op_for(op).has_value()) << op;
  }
  if (!generator_available()) return;
  JitSwitch restore;
  set_fused_jit_enabled(true);
  Graph doubles("body");
  ir::Value d = doubles.add_parameter("x", {DType::kFloat64, {64}});
  doubles.add_output(doubles.add_node("neg", {d}));
  EXPECT_EQ(FusedKernel(doubles).describe().find("generated code"), std::string::npos);
  Graph broadcast("body");
  ir::Value a = broadcast.add_parameter("a", {DType::kFloat32, {4, 16}});
  ir::Value row = broadcast.add_parameter("row", {DType::kFloat32, {16}});
  broadcast.add_output(broadcast.add_node("add", {a, row}));
  EXPECT_EQ(FusedKernel(broadcast).describe().find("generated code"), std::string::npos)
      << "an input broadcast along an axis is the evaluator's";
}

TEST(FusedJitTest, MalformedProgramsAreRefused) {
  JitProgram p;
  p.num_values = 2;
  p.inputs = {{0, false}};
  p.steps = {{JitOp::kAdd, 0, 1, 1}};  // reads value 1 before it is defined
  p.outputs = {1};
  try {
    FusedJit::compile(p);
    FAIL() << "a value read before its definition was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(e.message().find("value 1 used before it is defined"), std::string::npos)
        << e.message();
  }
}

}  // namespace
}  // namespace mf::runtime
