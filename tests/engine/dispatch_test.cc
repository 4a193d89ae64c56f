// PYNATIVE execution through the dispatcher: asynchronous by default, synchronous on request,
// errors that name the op, its scope and the call site, and out-of-memory that leaves the engine
// usable.

#include "engine/eager/dispatch.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <future>

#include "engine/engine_state.h"
#include "engine/nn/layers.h"
#include "engine/ops.h"
#include "engine_fixture.h"
#include "runtime/eager_executor.h"
#include "runtime/memory_pool.h"

namespace mf {
namespace {

using testing::EngineTest;
using DispatchTest = EngineTest;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST_F(DispatchTest, OpsComputeAndBroadcast) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<float>({10, 20, 30}, {3});
  EXPECT_EQ(ops::add(a, b).to_vector<float>(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(ops::mul(a, ops::scalar(2)).to_vector<float>(),
            (std::vector<float>{2, 4, 6, 8, 10, 12}));
  Tensor m = ops::matmul(a, ops::transpose(a, {1, 0}));
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{14, 32, 32, 77}));
}

TEST_F(DispatchTest, AsynchronousCallReturnsAPendingHandle) {
  Tensor x = Tensor::randn({256, 256}, 1);
  Tensor y = x;
  for (int i = 0; i < 50; ++i) y = ops::tanh(y);
  EXPECT_GT(y.impl()->ready_seq, 0u);       // a handle to work that may not have run yet
  EXPECT_EQ(y.shape(), (Shape{256, 256}));  // known without waiting: inferred at the call
  EXPECT_EQ(y.to_vector<float>().size(), 256u * 256u);
  EXPECT_TRUE(runtime::default_eager_executor().is_done(y.impl()->ready_seq));
}

TEST_F(DispatchTest, ShapeErrorsSurfaceAtTheCallSiteInBothModes) {
  for (bool synchronous : {false, true}) {
    context::set({{"pynative_synchronize", synchronous}});
    const std::string message = error_of([] {
      ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}));
    });
    EXPECT_NE(message.find("matmul"), std::string::npos) << message;
    EXPECT_NE(message.find("(2, 3)"), std::string::npos) << message;
    EXPECT_NE(message.find("dispatch_test.cc"), std::string::npos) << message;
  }
}

// A kernel that fails at run time: an op whose failure only shows when it executes. The print op
// with an unwritable print_file_path is such an op; so is an allocation the pool refuses. Here: a
// registered test op that throws.
const ir::OpRegistration kFailingOp =
    ir::define_op("test_fail_at_run")
        .arity(1)
        .traits(ir::Trait::kPure)
        .infer([](std::span<const ir::TensorType> in, const ir::Attrs&) {
          return std::vector<ir::TensorType>{in[0]};
        })
        .kernel([](const ir::KernelContext&) {
          MF_FAIL(InvalidArgument, "test kernel failed on purpose");
        })
        .reference([](std::span<const ir::RefTensor> in, const ir::Attrs&) {
          return std::vector<ir::RefTensor>{in[0]};
        })
        .samples({{{ir::TensorType{DType::kFloat32, {2}}}, {}}});

class Failing : public nn::Cell {
 public:
  Failing() : Cell("Failing") {}
  Tensor forward(const Tensor& x) override {
    return ops::call("test_fail_at_run", {ops::relu(x)}).front();
  }
};

TEST_F(DispatchTest, AsynchronousKernelErrorIsRethrownAtTheSyncPointNamingOpScopeAndCallSite) {
  Failing net;
  Tensor y = net(Tensor::ones({2}));  // returns at once: the failure has not been seen yet
  Tensor z = ops::add(y, y);          // queued behind the failure: dropped
  const std::string message = error_of([&] { z.sync(); });
  EXPECT_NE(message.find("test kernel failed on purpose"), std::string::npos) << message;
  EXPECT_NE(message.find("test_fail_at_run"), std::string::npos) << message;
  EXPECT_NE(message.find("Default/net-Failing"), std::string::npos) << message;
  EXPECT_NE(message.find("dispatch_test.cc"), std::string::npos) << message;
  // The engine is usable afterwards.
  EXPECT_EQ(ops::add(Tensor::ones({2}), Tensor::ones({2})).to_vector<float>(),
            (std::vector<float>{2, 2}));
}

TEST_F(DispatchTest, SynchronousKernelErrorIsThrownRightAtTheCall) {
  context::set({{"pynative_synchronize", true}});
  Failing net;
  const std::string message = error_of([&] { net(Tensor::ones({2})); });
  EXPECT_NE(message.find("test kernel failed on purpose"), std::string::npos) << message;
  EXPECT_NE(message.find("Default/net-Failing"), std::string::npos) << message;
}

TEST_F(DispatchTest, ScopeNamesFollowReserveClassNameInScope) {
  context::set({{"pynative_synchronize", true}, {"reserve_class_name_in_scope", false}});
  Failing net;
  const std::string message = error_of([&] { net(Tensor::ones({2})); });
  EXPECT_NE(message.find("Default/net"), std::string::npos) << message;
  EXPECT_EQ(message.find("net-Failing"), std::string::npos) << message;
}

// Outputs are allocated when the op runs: the failure is the op's error, thrown at the call
// synchronously and at the next sync point asynchronously, naming the op either way.
TEST_F(DispatchTest, OutOfMemoryUnderMaxDeviceMemoryNamesOpAndLimitThenRecovers) {
  for (bool synchronous : {true, false}) {
    SCOPED_TRACE(synchronous ? "synchronous" : "asynchronous");
    context::set({{"pynative_synchronize", synchronous}});
    context::set({{"max_device_memory", "0.001GB"}});  // about 1 MiB
    // Small inputs, a 4 MiB broadcast output: the op's own allocation is what fails.
    const std::string message = error_of([] {
      ops::add(Tensor::zeros({1024, 1}), Tensor::zeros({1, 1024})).sync();
    });
    EXPECT_NE(message.find("out of memory in op 'add'"), std::string::npos) << message;
    EXPECT_NE(message.find("4194304 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("max_device_memory"), std::string::npos) << message;
    context::set({{"max_device_memory", "1024GB"}});
    EXPECT_EQ(ops::add(Tensor::ones({2, 2}), Tensor::ones({2, 2})).to_vector<float>()[0], 2.0f);
  }
  context::set({{"max_device_memory", "1024GB"}});
  EXPECT_EQ(ops::add(Tensor::ones({1024, 1024}), Tensor::ones({1024, 1024})).to_vector<float>()[0],
            2.0f);
}

TEST_F(DispatchTest, ASecondRunAllocatesNothingNewFromTheSystem) {
  nn::Dense layer(64, 32, 1);
  Tensor x = Tensor::randn({16, 64}, 2);
  layer(x).sync();
  const size_t before = runtime::default_pool().stats().system_allocations;
  layer(x).sync();
  EXPECT_EQ(runtime::default_pool().stats().system_allocations, before);
}

}  // namespace
}  // namespace mf

namespace mf {
namespace {

using DispatchTest = testing::EngineTest;

// A queued op holds no output memory: its output is allocated when the worker runs it, so the
// asynchronous queue keeps no more alive than synchronous execution would.
TEST_F(DispatchTest, AQueuedOpHoldsNoOutputMemoryUntilItRuns) {
  // A queue thread needs a core the intra-op threads leave idle (pynative.queue_thread).
  context::set({{"pynative_synchronize", false}, {"runtime_num_threads", 1}});
  if (!engine::current_policy()->pynative_queue_thread.value) {
    GTEST_SKIP() << "one core: asynchronous ops run on the caller, nothing is ever queued";
  }
  const Tensor a = Tensor::ones({512, 512});
  const Tensor b = Tensor::ones({512, 512});
  a.sync();
  b.sync();
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  runtime::default_eager_executor().submit([released] { released.wait(); },
                                           runtime::TaskInfo::at("blocker"));
  const size_t before = runtime::default_pool().stats().in_use_bytes;
  const Tensor sum = ops::add(a, b);  // queued behind the blocker
  EXPECT_LT(runtime::default_pool().stats().in_use_bytes, before + 512 * 512 * sizeof(float));
  release.set_value();
  EXPECT_EQ(sum.to_vector<float>()[0], 2.0f);
}

// Queues convolutions of twelve shapes (each makes its own oneDNN primitive and JIT code when it
// runs) and exits without a sync point.
[[noreturn]] void queue_convolutions_and_exit() {
  ops::Conv2dOptions options;
  options.padding = {1, 1};
  const Tensor w = Tensor::randn({64, 64, 3, 3}, 2);
  for (int64_t i = 0; i < 12; ++i) ops::conv2d(Tensor::randn({1, 64, 5 + i, 5 + i}, 1), w, options);
  std::fprintf(stderr, "queued\n");
  std::exit(0);
}

// A program that ends (exit) with asynchronous ops still queued: they run before the process's
// statics are destroyed, so the exit is clean. Run in a fresh process (the threadsafe death-test
// style re-executes this binary), so the convolutions are oneDNN's first there and create its JIT
// state on the worker; run from the executor's static destructor instead, they met that state
// already destroyed and crashed about once in two.
// A given-up input that nothing else holds becomes the output of an elementwise op (in place);
// one that another handle, or a copy of it in another order, still reads never does.
TEST_F(DispatchTest, AGivenUpInputNothingElseHoldsIsWrittenOverOthersAreNot) {
  for (const bool synchronous : {true, false}) {
    SCOPED_TRACE(synchronous ? "synchronous" : "asynchronous");
    context::set({{"pynative_synchronize", synchronous}});
    Tensor x = Tensor::from_vector<float>({-1.f, 2.f, -3.f, 4.f}, {4});
    const void* storage = x.raw_data();
    const uint64_t version = x.impl()->buffer->version();
    std::vector<Tensor> given;  // (an initializer list would keep a copy of x alive)
    given.push_back(std::move(x));
    const Tensor y = engine::call_op_reusing_inputs("relu", std::move(given), {}).at(0);
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0.f, 2.f, 0.f, 4.f}));
    EXPECT_EQ(y.raw_data(), storage) << "written over its given-up input";
    EXPECT_GT(y.impl()->buffer->version(), version) << "the buffer's old content is gone";

    // Still held by the caller: a new buffer, and the caller's values intact.
    const Tensor kept = Tensor::from_vector<float>({-1.f, 2.f}, {2});
    const Tensor z = engine::call_op_reusing_inputs("neg", {kept}, {}).at(0);
    EXPECT_NE(z.raw_data(), kept.raw_data());
    EXPECT_EQ(kept.to_vector<float>(), (std::vector<float>{-1.f, 2.f}));
    EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{1.f, -2.f}));

    // Not elementwise: never in place.
    Tensor m = Tensor::from_vector<float>({1.f, 2.f, 3.f, 4.f}, {2, 2});
    const void* m_storage = m.raw_data();
    const Tensor t = engine::call_op_reusing_inputs("transpose", {std::move(m)},
                                                    {{"perm", std::vector<int64_t>{1, 0}}})
                         .at(0);
    EXPECT_NE(t.raw_data(), m_storage);
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.f, 3.f, 2.f, 4.f}));
  }
}

TEST(DispatchExitTest, OpsStillQueuedAtExitRunAndTheProcessExitsCleanly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(queue_convolutions_and_exit(), ::testing::ExitedWithCode(0), "queued");
}

}  // namespace
}  // namespace mf
