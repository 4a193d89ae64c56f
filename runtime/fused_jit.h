#pragma once
// Machine code for fused elementwise bodies. The tile evaluator (runtime/fused_kernel.cc) calls
// each member op's tile function over a tile in L1, so every op loads and stores every element:
// about 3 cycles per op per 16-float packet on AVX-512, which leaves chains of cheap ops at twice
// the time memory needs. For a body whose ops are each one AVX-512 instruction in Eigen's packet
// math (add, sub, mul, div, maximum, minimum, neg, abs, relu, square on float32), this generates a
// loop that keeps every value of a packet in a vector register: inputs are loaded once, outputs
// stored once.
//
// Each op is emitted as the very instruction, operand order included, that Eigen's packet function
// for it uses (maximum is _mm512_max_ps(b, a), neg is 0 - a, abs clears the sign bit), and nothing
// is contracted (no FMA), so the generated code gives the tile functions' bits: plain kernel, tile
// evaluator and generated code agree bit for bit. The last partial packet is masked, not padded;
// masked-off lanes are neither loaded nor stored.

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace mf::runtime {

enum class JitOp : uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kNeg,
  kAbs,
  kRelu,
  kSquare
};

// The JitOp of an op of that name over float32 (nullopt: the generator does not cover it).
std::optional<JitOp> jit_op_for(std::string_view op_name);
// neg, abs, relu and square read one operand; the others two.
bool is_unary(JitOp op);

// A body as the generator takes it: numbered values, each defined once.
struct JitProgram {
  struct Input {
    int value = -1;
    bool scalar = false;  // one element for every lane (a constant or a scalar parameter)
  };
  struct Step {
    JitOp op = JitOp::kAdd;
    int a = -1, b = -1;  // b: -1 for unary ops
    int result = -1;
  };
  int num_values = 0;
  std::vector<Input> inputs;  // inputs[k] is read through the k-th input pointer
  std::vector<Step> steps;    // in an order where operands come first
  std::vector<int> outputs;   // outputs[k]: the value written through the k-th output pointer
  // Outputs too large to be read back from cache: whole packets go to memory with non-temporal
  // stores (no read for ownership) wherever every output of a run starts 64-byte aligned.
  bool stream_outputs = false;
};

class FusedJit {
 public:
  // The generated loop, or nullptr when the CPU lacks AVX-512F, generation is switched off
  // (set_fused_jit_enabled), or the values live at once need more than the 32 vector registers.
  // InvalidArgument for a malformed program.
  static std::unique_ptr<FusedJit> compile(const JitProgram& program);
  ~FusedJit();

  // For i in [begin, end): outputs[k][i] from inputs[j][i] (full inputs) and *inputs[j] (scalar
  // ones). An output may be the same memory as a full input: a packet's inputs are all loaded
  // before any of its outputs is stored.
  void run(const void* const* inputs, void* const* outputs, int64_t begin, int64_t end) const;
  size_t code_bytes() const;

 private:
  struct Impl;
  explicit FusedJit(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// On by default. Tests and benchmarks switch it off to compare with the tile evaluator; it applies
// to kernels built afterwards.
void set_fused_jit_enabled(bool enabled);
bool fused_jit_enabled();

}  // namespace mf::runtime
