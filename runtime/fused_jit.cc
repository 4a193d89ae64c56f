#include "runtime/fused_jit.h"

#include <array>
#include <atomic>
#include <string>

#include "base/error.h"

#if defined(MODEFLOW_HAVE_XBYAK) && defined(__x86_64__) && defined(__AVX512F__)
#define MF_FUSED_JIT 1
#include <xbyak/xbyak.h>
#include <xbyak/xbyak_util.h>
#endif

namespace mf::runtime {
namespace {

std::atomic<bool> g_enabled{true};

struct OpName {
  std::string_view name;
  JitOp op;
};
constexpr std::array<OpName, 10> kOps = {{{"add", JitOp::kAdd},
                                          {"sub", JitOp::kSub},
                                          {"mul", JitOp::kMul},
                                          {"div", JitOp::kDiv},
                                          {"maximum", JitOp::kMaximum},
                                          {"minimum", JitOp::kMinimum},
                                          {"neg", JitOp::kNeg},
                                          {"abs", JitOp::kAbs},
                                          {"relu", JitOp::kRelu},
                                          {"square", JitOp::kSquare}}};

void check_program(const JitProgram& p) {
  std::vector<bool> defined(p.num_values, false);
  auto define = [&](int v) {
    MF_CHECK(v >= 0 && v < p.num_values && !defined[v], InvalidArgument, "fused jit: value ", v,
             " defined twice or out of range");
    defined[v] = true;
  };
  auto use = [&](int v) {
    MF_CHECK(v >= 0 && v < p.num_values && defined[v], InvalidArgument, "fused jit: value ", v,
             " used before it is defined");
  };
  for (const JitProgram::Input& in : p.inputs) define(in.value);
  for (const JitProgram::Step& s : p.steps) {
    use(s.a);
    if (!is_unary(s.op)) use(s.b);
    define(s.result);
  }
  for (int v : p.outputs) use(v);
}

}  // namespace

bool is_unary(JitOp op) {
  return op == JitOp::kNeg || op == JitOp::kAbs || op == JitOp::kRelu || op == JitOp::kSquare;
}

std::optional<JitOp> jit_op_for(std::string_view op_name) {
  for (const OpName& entry : kOps) {
    if (entry.name == op_name) return entry.op;
  }
  return std::nullopt;
}

void set_fused_jit_enabled(bool enabled) {
  g_enabled.store(enabled);
}
bool fused_jit_enabled() {
  return g_enabled.load();
}

#if MF_FUSED_JIT

namespace {

using Kernel = void (*)(const void* const* inputs, void* const* outputs, int64_t begin,
                        int64_t end);

constexpr int kFloatsPerPacket = 16;
constexpr uintptr_t kStreamAlignment = 64;  // vmovntps on a zmm needs its 64 bytes aligned

// zmm31 carries an output that is an input no step reads (copied through a register).
constexpr int kScratch = 31;

// Vector registers for the program's values: scalars for the whole loop, everything else from its
// definition to its last use (outputs are stored where they are defined). A register freed at a
// step may become that step's result: the instruction reads its operands before it writes.
struct Registers {
  std::vector<int> of_value;  // zmm index per value; -1: not held in a register
  int zero = -1;              // 0.0f in every lane (neg, relu)
  int abs_mask = -1;          // 0x7fffffff in every lane (abs)
};

std::optional<Registers> allocate(const JitProgram& p) {
  Registers r;
  r.of_value.assign(p.num_values, -1);
  std::vector<int> last_use(p.num_values, -1);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    last_use[p.steps[s].a] = static_cast<int>(s);
    if (!is_unary(p.steps[s].op)) last_use[p.steps[s].b] = static_cast<int>(s);
  }
  std::vector<int> free_regs;
  for (int z = kScratch - 1; z >= 0; --z) free_regs.push_back(z);
  auto take = [&]() -> int {
    if (free_regs.empty()) return -1;
    const int z = free_regs.back();
    free_regs.pop_back();
    return z;
  };
  bool need_zero = false, need_mask = false;
  for (const JitProgram::Step& s : p.steps) {
    need_zero = need_zero || s.op == JitOp::kNeg || s.op == JitOp::kRelu;
    need_mask = need_mask || s.op == JitOp::kAbs;
  }
  if (need_zero && (r.zero = take()) < 0) return std::nullopt;
  if (need_mask && (r.abs_mask = take()) < 0) return std::nullopt;
  std::vector<bool> scalar(p.num_values, false);
  for (const JitProgram::Input& in : p.inputs) {
    scalar[in.value] = in.scalar;
    if (last_use[in.value] < 0) continue;  // read by no step (an output at most): not held
    if ((r.of_value[in.value] = take()) < 0) return std::nullopt;
  }
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const JitProgram::Step& step = p.steps[s];
    const int a = step.a, b = is_unary(step.op) ? -1 : step.b;
    for (int v : {a, b}) {
      if (v < 0 || scalar[v] || last_use[v] != static_cast<int>(s)) continue;
      if (v == b && b == a) continue;  // the same value twice: freed once
      free_regs.push_back(r.of_value[v]);
    }
    if ((r.of_value[step.result] = take()) < 0) return std::nullopt;
    if (last_use[step.result] < 0) free_regs.push_back(r.of_value[step.result]);  // only stored
  }
  return r;
}

class Generator : public Xbyak::CodeGenerator {
 public:
  // `streaming`: whole packets go to memory with non-temporal stores (the caller runs this variant
  // only where every output packet is 64-byte aligned) and an sfence ends the function.
  Generator(const JitProgram& p, const Registers& r, size_t max_bytes, bool streaming)
      : Xbyak::CodeGenerator(max_bytes, Xbyak::DontSetProtectRWE),
        p_(p),
        r_(r),
        streaming_(streaming) {
    // void kernel(const void* const* inputs (rdi), void* const* outputs (rsi),
    //             int64_t begin (rdx), int64_t end (rcx))
    // r8: the packet's first element; r9: elements left; rax: a pointer; k1: the tail's lanes.
    using namespace Xbyak;
    // Registers are fixed per value for the whole function: the loop and the masked tail share
    // them.
    if (r_.zero >= 0) vpxord(Zmm(r_.zero), Zmm(r_.zero), Zmm(r_.zero));
    if (r_.abs_mask >= 0) {
      mov(eax, 0x7fffffff);
      vpbroadcastd(Zmm(r_.abs_mask), eax);
    }
    for (size_t k = 0; k < p_.inputs.size(); ++k) {
      const JitProgram::Input& in = p_.inputs[k];
      if (!in.scalar || r_.of_value[in.value] == -1) continue;
      mov(rax, ptr[rdi + 8 * k]);
      vbroadcastss(Zmm(reg(in.value)), dword[rax]);
    }
    mov(r8, rdx);
    Label loop, tail, done;
    L(loop);
    mov(r9, rcx);
    sub(r9, r8);
    cmp(r9, kFloatsPerPacket);
    jl(tail, T_NEAR);
    packet(false);
    add(r8, kFloatsPerPacket);
    jmp(loop, T_NEAR);
    L(tail);
    test(r9, r9);
    jz(done, T_NEAR);
    mov(eax, 1);
    shlx(eax, eax, r9d);
    dec(eax);
    kmovw(k1, eax);
    packet(true);
    L(done);
    if (streaming_) sfence();  // the stores are weakly ordered: done before the caller says so
    vzeroupper();
    ret();
  }

 private:
  void packet(bool masked) {
    using namespace Xbyak;
    // Every full input first, so an output that shares an input's memory is stored only after the
    // packet has read it.
    for (size_t k = 0; k < p_.inputs.size(); ++k) {
      const JitProgram::Input& in = p_.inputs[k];
      if (in.scalar || r_.of_value[in.value] == -1) continue;
      mov(rax, ptr[rdi + 8 * k]);
      const Zmm dst(reg(in.value));
      if (masked) {
        vmovups(dst | k1 | T_z, ptr[rax + r8 * 4]);
      } else {
        vmovups(dst, ptr[rax + r8 * 4]);
      }
    }
    // Outputs that are inputs as they are.
    for (const JitProgram::Input& in : p_.inputs) store_value(in.value, masked);
    for (const JitProgram::Step& s : p_.steps) {
      const Zmm dst(reg(s.result));
      const Zmm a(reg(s.a));
      switch (s.op) {
        case JitOp::kAdd:
          vaddps(dst, a, Zmm(reg(s.b)));
          break;
        case JitOp::kSub:
          vsubps(dst, a, Zmm(reg(s.b)));
          break;
        case JitOp::kMul:
          vmulps(dst, a, Zmm(reg(s.b)));
          break;
        case JitOp::kDiv:
          vdivps(dst, a, Zmm(reg(s.b)));
          break;
        case JitOp::kMaximum:  // Eigen's pmax(a, b) is _mm512_max_ps(b, a)
          vmaxps(dst, Zmm(reg(s.b)), a);
          break;
        case JitOp::kMinimum:  // pmin(a, b) is _mm512_min_ps(b, a)
          vminps(dst, Zmm(reg(s.b)), a);
          break;
        case JitOp::kNeg:  // pnegate(a) is _mm512_sub_ps(0, a)
          vsubps(dst, Zmm(r_.zero), a);
          break;
        case JitOp::kAbs:  // pabs clears the sign bit
          vpandd(dst, a, Zmm(r_.abs_mask));
          break;
        case JitOp::kRelu:  // x.max(0): pmax(x, 0) is _mm512_max_ps(0, x)
          vmaxps(dst, Zmm(r_.zero), a);
          break;
        case JitOp::kSquare:
          vmulps(dst, a, a);
          break;
      }
      store_value(s.result, masked);
    }
  }

  // Stores `value` through every output pointer that names it.
  void store_value(int value, bool masked) {
    using namespace Xbyak;
    for (size_t k = 0; k < p_.outputs.size(); ++k) {
      if (p_.outputs[k] != value) continue;
      Zmm src(kScratch);
      if (r_.of_value[value] == -1) {
        // An input no step reads: loaded into the scratch register.
        mov(rax, ptr[rdi + 8 * input_index(value)]);
        if (is_scalar_input(value)) {
          vbroadcastss(src, dword[rax]);
        } else if (masked) {
          vmovups(src | k1 | T_z, ptr[rax + r8 * 4]);
        } else {
          vmovups(src, ptr[rax + r8 * 4]);
        }
      } else {
        src = Zmm(reg(value));
      }
      mov(rax, ptr[rsi + 8 * k]);
      if (masked) {
        vmovups(ptr[rax + r8 * 4] | k1, src);
      } else {
        if (streaming_) {
          vmovntps(ptr[rax + r8 * 4], src);
        } else {
          vmovups(ptr[rax + r8 * 4], src);
        }
      }
    }
  }

  size_t input_index(int value) const {
    for (size_t k = 0; k < p_.inputs.size(); ++k) {
      if (p_.inputs[k].value == value) return k;
    }
    MF_FAIL(Internal, "fused jit: value ", value, " is not an input");
  }
  bool is_scalar_input(int value) const { return p_.inputs[input_index(value)].scalar; }
  int reg(int value) const { return r_.of_value[value]; }

  const JitProgram& p_;
  Registers r_;
  bool streaming_;
};

bool cpu_has_avx512f() {
  static const bool has = [] {
    const Xbyak::util::Cpu cpu;
    return cpu.has(Xbyak::util::Cpu::tAVX512F) && cpu.has(Xbyak::util::Cpu::tBMI2);
  }();
  return has;
}

}  // namespace

struct FusedJit::Impl {
  std::unique_ptr<Generator> code, streaming_code;
  Kernel kernel = nullptr;
  Kernel streaming = nullptr;  // set when the program streams its outputs
  size_t num_outputs = 0;
};

std::unique_ptr<FusedJit> FusedJit::compile(const JitProgram& program) {
  check_program(program);
  if (!fused_jit_enabled() || !cpu_has_avx512f()) return nullptr;
  const std::optional<Registers> regs = allocate(program);
  if (!regs) return nullptr;  // more values live at once than registers
  const size_t max_bytes =
      4096 + 64 * (program.steps.size() + program.inputs.size() + program.outputs.size()) * 2;
  auto impl = std::make_unique<Impl>();
  try {
    impl->code = std::make_unique<Generator>(program, *regs, max_bytes, false);
    impl->code->setProtectModeRE();
    if (program.stream_outputs) {
      impl->streaming_code = std::make_unique<Generator>(program, *regs, max_bytes, true);
      impl->streaming_code->setProtectModeRE();
      impl->streaming = impl->streaming_code->getCode<Kernel>();
    }
  } catch (const Xbyak::Error&) {
    return nullptr;  // out of code space or memory protection refused: the tile evaluator runs
  }
  impl->kernel = impl->code->getCode<Kernel>();
  impl->num_outputs = program.outputs.size();
  return std::unique_ptr<FusedJit>(new FusedJit(std::move(impl)));
}

FusedJit::FusedJit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FusedJit::~FusedJit() = default;

void FusedJit::run(const void* const* inputs, void* const* outputs, int64_t begin,
                   int64_t end) const {
  if (impl_->streaming != nullptr) {
    bool aligned = true;
    for (size_t k = 0; k < impl_->num_outputs; ++k) {
      aligned =
          aligned && (reinterpret_cast<uintptr_t>(static_cast<const float*>(outputs[k]) + begin) %
                          kStreamAlignment ==
                      0);
    }
    if (aligned) return impl_->streaming(inputs, outputs, begin, end);
  }
  impl_->kernel(inputs, outputs, begin, end);
}

size_t FusedJit::code_bytes() const {
  return impl_->code->getSize();
}

#else  // no code generator in this build

struct FusedJit::Impl {};

std::unique_ptr<FusedJit> FusedJit::compile(const JitProgram& program) {
  check_program(program);
  return nullptr;
}
FusedJit::FusedJit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FusedJit::~FusedJit() = default;
void FusedJit::run(const void* const*, void* const*, int64_t, int64_t) const {
  MF_FAIL(Internal, "fused jit: not available in this build");
}
size_t FusedJit::code_bytes() const {
  return 0;
}

#endif

}  // namespace mf::runtime
