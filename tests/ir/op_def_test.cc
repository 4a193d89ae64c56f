#include "ir/op_def.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace mf::ir {
namespace {

std::vector<TensorType> same_as_first(std::span<const TensorType> in, const Attrs&) {
  return {in[0]};
}

const OpRegistration kTestScale = define_op("test_scale")
                                      .arity(1)
                                      .attr("factor", AttrKind::kFloat)
                                      .attr("bias", AttrKind::kFloat, 0.0)
                                      .attr("axes", AttrKind::kInts, std::vector<int64_t>{})
                                      .traits(Trait::kElementwise | Trait::kPure)
                                      .infer(same_as_first);

const OpRegistration kTestBroadcastAdd =
    define_op("test_bcast_add")
        .arity(2)
        .traits(Trait::kBroadcast | Trait::kCommutative)
        .infer([](std::span<const TensorType> in, const Attrs&) {
          return std::vector<TensorType>{
              {in[0].dtype, broadcast_shapes(in[0].shape, in[1].shape, "test_bcast_add")}};
        });

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.message();
  }
  return "<no error>";
}

TEST(OpDefTest, RegistryLookups) {
  ASSERT_NE(find_op("test_scale"), nullptr);
  EXPECT_EQ(&get_op("test_scale"), &kTestScale.def());
  EXPECT_EQ(find_op("test_nope"), nullptr);
  auto ops = all_ops();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end(),
                             [](const OpDef* a, const OpDef* b) { return a->name < b->name; }));
  EXPECT_TRUE(kTestScale.def().has(Trait::kPure));
  EXPECT_FALSE(kTestScale.def().has(Trait::kOpaque));
}

TEST(OpDefTest, NotFoundSuggestsClosestNames) {
  try {
    get_op("test_scal");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
    EXPECT_NE(e.message().find("unknown op 'test_scal'; did you mean 'test_scale'"),
              std::string::npos)
        << e.message();
  }
}

TEST(OpDefTest, DuplicateRegistrationIsInternal) {
  try {
    [[maybe_unused]] OpRegistration again = define_op("test_scale").arity(1).infer(same_as_first);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(e.message().find("op 'test_scale' is registered twice"), std::string::npos);
  }
}

TEST(OpDefTest, InferFillsDefaultsAndWidensInts) {
  TensorType t{DType::kFloat32, {2, 3}};
  Attrs attrs{{"factor", int64_t{2}}};
  auto out = kTestScale.def().infer_types(std::vector<TensorType>{t}, attrs);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], t);
  EXPECT_EQ(std::get<double>(attrs.at("factor")), 2.0);
  EXPECT_EQ(std::get<double>(attrs.at("bias")), 0.0);
  EXPECT_TRUE(attrs.contains("axes"));
}

TEST(OpDefTest, InferErrors) {
  const OpDef& scale = kTestScale.def();
  TensorType t{DType::kFloat32, {2, 3}};
  std::vector<TensorType> two{t, t};
  EXPECT_EQ(message_of([&] {
              Attrs a{{"factor", 1.0}};
              scale.infer_types(two, a);
            }),
            "op 'test_scale' takes 1 input, got 2: (<Tensor[Float32], (2, 3)>, <Tensor[Float32], "
            "(2, 3)>)");
  std::vector<TensorType> one{t};
  EXPECT_EQ(message_of([&] {
              Attrs a{{"factor", 1.0}, {"gamma", 1.0}};
              scale.infer_types(one, a);
            }),
            "op 'test_scale' has no attribute 'gamma' (it has factor, bias, axes)");
  EXPECT_EQ(message_of([&] {
              Attrs a;
              scale.infer_types(one, a);
            }),
            "op 'test_scale' requires attribute 'factor' (float)");
  EXPECT_EQ(message_of([&] {
              Attrs a{{"factor", std::string("x")}};
              scale.infer_types(one, a);
            }),
            "attribute 'factor' of op 'test_scale' is str, expected float");
}

TEST(OpDefTest, InferErrorFromInferenceNamesInputs) {
  std::vector<TensorType> in{{DType::kFloat32, {2, 3}}, {DType::kFloat32, {4}}};
  Attrs a;
  try {
    kTestBroadcastAdd.def().infer_types(in, a);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    ASSERT_EQ(e.context().size(), 1u);
    EXPECT_EQ(e.context()[0],
              "while inferring op 'test_bcast_add' on inputs (<Tensor[Float32], (2, 3)>, "
              "<Tensor[Float32], (4)>)");
  }
}

TEST(OpDefTest, TypedAttributeAccess) {
  Attrs a{{"axis", int64_t{1}}, {"name", std::string("x")}, {"dt", DType::kInt32}};
  EXPECT_EQ(attr_int(a, "axis", "op"), 1);
  EXPECT_EQ(attr_float(a, "axis", "op"), 1.0);
  EXPECT_EQ(attr_string(a, "name", "op"), "x");
  EXPECT_EQ(attr_dtype(a, "dt", "op"), DType::kInt32);
  EXPECT_EQ(message_of([&] { attr_int(a, "missing", "softmax"); }),
            "attribute 'missing' of op 'softmax' is missing");
  EXPECT_EQ(message_of([&] { attr_int(a, "name", "softmax"); }),
            "attribute 'name' of op 'softmax' is str, expected int");
  EXPECT_EQ(attr_kind_name(attr_kind(AttrValue{std::vector<double>{}})), "floats");
}

}  // namespace
}  // namespace mf::ir
