// MindSpore .ckpt checkpoints: every dtype round-trips, a net's weights move into a fresh net,
// load_param_into_net follows MindSpore (reports, casts, prefixes), the bytes are the protobuf
// encoding MindSpore writes, and a damaged file is refused, never trusted or crashed on.

#include "engine/io/checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "checkpoint.pb.h"
#include "engine/models/registry.h"
#include "engine_fixture.h"

namespace mf {
namespace {

namespace fs = std::filesystem;
using checkpoint::NamedTensors;

class CheckpointTest : public testing::EngineTestWithDir {
 protected:
  fs::path file_ = dir_ / "net.ckpt";
};

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& file, std::string_view bytes) {
  std::ofstream(file, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::string raw_bytes(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw_data()), t.nbytes());
}

// One entry as MindSpore's writer makes it (one serialized Checkpoint per part).
std::string entry(const std::string& tag, std::vector<int64_t> dims, const std::string& type,
                  const std::string& content) {
  ::Checkpoint record;
  auto* value = record.add_value();
  value->set_tag(tag);
  auto* tensor = value->mutable_tensor();
  for (int64_t d : dims) tensor->add_dims(d);
  tensor->set_tensor_type(type);
  tensor->set_tensor_content(content);
  return record.SerializeAsString();
}

std::string floats(std::vector<float> values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// The kind and a piece of the message of what `fn` throws; fails when it does not throw mf::Error.
template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, const std::string& piece) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing: " << piece;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(piece), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, EveryDtypeRoundTripsInOrder) {
  const NamedTensors saved = {
      {"f32", Tensor::from_vector<float>({1.5f, -2.25f, 3e30f, 0.f, -0.f, 7}, {2, 3})},
      {"f64", Tensor::from_vector<double>({1e-300, -2.5}, {2})},
      {"i32", Tensor::from_vector<int32_t>({INT32_MIN, 0, INT32_MAX}, {3, 1})},
      {"i64", Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX}, {1, 2})},
      {"bool", Tensor::from_vector(std::vector<bool>{true, false, true}, {3})},
      {"scalar", Tensor::full({}, 4.5)},
  };
  checkpoint::save(file_, saved);
  const NamedTensors loaded = checkpoint::load(file_);
  ASSERT_EQ(loaded.size(), saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    EXPECT_EQ(loaded[i].first, saved[i].first);
    EXPECT_EQ(loaded[i].second.dtype(), saved[i].second.dtype()) << saved[i].first;
    EXPECT_EQ(loaded[i].second.shape(), saved[i].second.shape()) << saved[i].first;
    EXPECT_EQ(raw_bytes(loaded[i].second), raw_bytes(saved[i].second)) << saved[i].first;
  }
  for (DType dtype : ir::kAllDTypes) {
    EXPECT_EQ(checkpoint::dtype_of_type_name(checkpoint::type_name(dtype)), dtype);
  }
}

TEST_F(CheckpointTest, ZeroSizedTensorsRoundTrip) {
  const NamedTensors saved = {{"a", Tensor::zeros({0})},
                              {"b", Tensor::zeros({0, 3}, DType::kInt64)},
                              {"c", Tensor::zeros({2, 0, 4}, DType::kBool)}};
  checkpoint::save(file_, saved);
  const NamedTensors loaded = checkpoint::load(file_);
  ASSERT_EQ(loaded.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(loaded[i].second.shape(), saved[i].second.shape());
    EXPECT_EQ(loaded[i].second.dtype(), saved[i].second.dtype());
  }
}

// The file is exactly the protobuf encoding of MindSpore's message, written out by hand here so
// that a changed field number, wire type or order is caught.
TEST_F(CheckpointTest, BytesAreMindSporesEncoding) {
  checkpoint::save(file_, {{"w", Tensor::from_vector<float>({1.f, 2.f}, {2})}});
  const std::string expected = std::string(
      "\x0a\x1a"                          // Checkpoint.value (1, bytes), 26 bytes
      "\x0a\x01w"                         //   Value.tag (1, bytes) "w"
      "\x12\x15"                          //   Value.tensor (2, bytes), 21 bytes
      "\x08\x02"                          //     TensorProto.dims (1, varint) 2, unpacked
      "\x12\x07"                          //     TensorProto.tensor_type (2, bytes)
      "Float32"                           //
      "\x1a\x08"                          //     TensorProto.tensor_content (3, bytes), 8 bytes
      "\x00\x00\x80\x3f\x00\x00\x00\x40"  //     1.0f, 2.0f little-endian
      ,
      28);
  EXPECT_EQ(read_bytes(file_), expected);
  // Two entries: each its own Checkpoint record, back to back, as MindSpore appends them.
  checkpoint::save(file_, {{"a", Tensor::from_vector<int64_t>({5}, {1})},
                           {"b", Tensor::from_vector(std::vector<bool>{true}, {})}});
  EXPECT_EQ(read_bytes(file_), entry("a", {1}, "Int64", std::string("\x05\0\0\0\0\0\0\0", 8)) +
                                   entry("b", {}, "Bool", std::string("\x01", 1)));
}

TEST_F(CheckpointTest, ANetsWeightsLoadIntoAFreshNetOfAnotherSeed) {
  models::Mlp trained({4, 8, 3}, /*seed=*/1);
  models::Mlp fresh({4, 8, 3}, /*seed=*/2);
  const Tensor x = Tensor::randn({5, 4}, 7);
  ASSERT_NE(trained(x).to_vector<float>(), fresh(x).to_vector<float>());
  checkpoint::save(file_, trained);
  const auto report = checkpoint::load_param_into_net(fresh, checkpoint::load(file_));
  EXPECT_TRUE(report.param_not_load.empty());
  EXPECT_TRUE(report.ckpt_not_load.empty());
  EXPECT_EQ(trained(x).to_vector<float>(), fresh(x).to_vector<float>());
  const auto names = trained.named_parameters();
  const auto loaded = checkpoint::load(file_);
  ASSERT_EQ(loaded.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(loaded[i].first, names[i].first);
}

TEST_F(CheckpointTest, TheReportListsWhatDidNotMatchInMindSporesOrder) {
  models::Mlp net({4, 8, 3}, 1);
  const auto params = net.named_parameters();
  ASSERT_GE(params.size(), 4u);
  const Tensor before = params[0].second;
  NamedTensors given = {{"extra.z", Tensor::zeros({1})},
                        {params[1].first, Tensor::ones(params[1].second.shape())},
                        {"extra.a", Tensor::zeros({2})}};
  const auto report = checkpoint::load_param_into_net(net, given);
  std::vector<std::string> not_loaded;
  for (size_t i = 0; i < params.size(); ++i) {
    if (i != 1) not_loaded.push_back(params[i].first);
  }
  EXPECT_EQ(report.param_not_load, not_loaded);
  EXPECT_EQ(report.ckpt_not_load, (std::vector<std::string>{"extra.z", "extra.a"}));
  const auto after = net.named_parameters();
  EXPECT_EQ(after[1].second.to_vector<float>(),
            std::vector<float>(size_t(params[1].second.numel()), 1.f));
  EXPECT_EQ(raw_bytes(after[0].second), raw_bytes(before));
}

TEST_F(CheckpointTest, DtypesCastUnlessStrictAndNeverAcrossKinds) {
  models::Mlp net({2, 2}, 1);
  const auto params = net.named_parameters();
  const std::string weight = params[0].first;
  const Shape shape = params[0].second.shape();
  const Tensor f64 = Tensor::full(shape, 0.5, DType::kFloat64);
  expect_error(
      [&] {
        checkpoint::load_param_into_net(net, {{weight, f64}}, true);
      },
      ErrorKind::kInvalidArgument, "strict_load=True");
  checkpoint::load_param_into_net(net, {{weight, f64}}, false);
  const Tensor now = net.named_parameters()[0].second;
  EXPECT_EQ(now.dtype(), DType::kFloat32);
  EXPECT_EQ(now.to_vector<float>(), std::vector<float>(size_t(now.numel()), 0.5f));
  expect_error(
      [&] {
        checkpoint::load_param_into_net(net, {{weight, Tensor::zeros(shape, DType::kInt32)}});
      },
      ErrorKind::kInvalidArgument, "Float32 in the net but Int32 in the checkpoint");
}

TEST_F(CheckpointTest, ShapesMustMatchSaveForTrailingOnes) {
  models::Mlp net({2, 3}, 1);
  const auto params = net.named_parameters();
  const std::string weight = params[0].first;  // (3, 2)
  expect_error(
      [&] {
        checkpoint::load_param_into_net(net, {{weight, Tensor::zeros({2, 3})}});
      },
      ErrorKind::kInvalidArgument, "'" + weight + "' has shape (3, 2) in the net but (2, 3)");
  checkpoint::load_param_into_net(net, {{weight, Tensor::ones({3, 2, 1, 1})}});
  EXPECT_EQ(net.named_parameters()[0].second.shape(), (Shape{3, 2}));
  EXPECT_EQ(net.named_parameters()[0].second.to_vector<float>(), std::vector<float>(6, 1.f));
}

TEST_F(CheckpointTest, AFailedLoadLeavesTheNetUnchanged) {
  models::Mlp net({2, 3}, 1);
  const auto params = net.named_parameters();
  const std::string before = raw_bytes(params[0].second);
  NamedTensors given = {{params[0].first, Tensor::ones(params[0].second.shape())},
                        {params[1].first, Tensor::ones({99})}};
  EXPECT_THROW(checkpoint::load_param_into_net(net, given), Error);
  EXPECT_EQ(raw_bytes(net.named_parameters()[0].second), before);
}

TEST_F(CheckpointTest, MissingParametersAreFoundUnderACommonPrefixUnlessStrict) {
  models::Mlp net({2, 3}, 1);
  NamedTensors given;
  for (const auto& [name, value] : net.named_parameters()) {
    given.emplace_back("backbone." + name, Tensor::ones(value.shape()));
  }
  const auto strict = checkpoint::load_param_into_net(net, given, true);
  EXPECT_EQ(strict.param_not_load.size(), given.size());
  const auto report = checkpoint::load_param_into_net(net, given);
  EXPECT_TRUE(report.param_not_load.empty());
  EXPECT_TRUE(report.ckpt_not_load.empty());
  for (const auto& [name, value] : net.named_parameters()) {
    EXPECT_EQ(value.to_vector<float>(), std::vector<float>(size_t(value.numel()), 1.f)) << name;
  }
}

TEST_F(CheckpointTest, SaveRefusesBadNamesAndLeavesThePreviousFileIntact) {
  checkpoint::save(file_, {{"keep", Tensor::ones({2})}});
  const std::string before = read_bytes(file_);
  expect_error(
      [&] {
        checkpoint::save(file_, {{"", Tensor::ones({1})}});
      },
      ErrorKind::kInvalidArgument, "empty name");
  expect_error(
      [&] {
        checkpoint::save(file_, {{"a", Tensor::ones({1})}, {"a", Tensor::ones({1})}});
      },
      ErrorKind::kInvalidArgument, "'a' is given twice");
  expect_error(
      [&] {
        checkpoint::save(file_, {{"a", Tensor()}});
      },
      ErrorKind::kInvalidArgument, "undefined");
  expect_error(
      [&] {
        checkpoint::save(dir_ / "no-such-dir" / "x.ckpt", {{"a", Tensor::ones({1})}});
      },
      ErrorKind::kInvalidArgument, "cannot write checkpoint");
  EXPECT_EQ(read_bytes(file_), before);
  // Nothing but the file itself: no temporary file is left behind.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++files;
  EXPECT_EQ(files, 1u);
}

TEST_F(CheckpointTest, MindSporesPartsOfOneTensorAreJoined) {
  // MindSpore writes a tensor above 512 MiB as consecutive entries of one tag, each with the full
  // dims and the next part of the data.
  write_bytes(file_, entry("w", {2, 2}, "Float32", floats({1, 2})) +
                         entry("w", {2, 2}, "Float32", floats({3})) +
                         entry("w", {2, 2}, "Float32", floats({4})) +
                         entry("b", {}, "Int32", std::string("\x07\0\0\0", 4)));
  const auto loaded = checkpoint::load(file_);
  ASSERT_EQ(loaded.size(), 2u);
  EXPECT_EQ(loaded[0].second.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(loaded[1].second.to_vector<int32_t>(), (std::vector<int32_t>{7}));
  EXPECT_EQ(loaded[1].second.shape(), Shape{});
  // MindSpore's loader reads dims [0] with one element as a number (a scalar).
  write_bytes(file_, entry("epoch", {0}, "Int64", std::string("\x03\0\0\0\0\0\0\0", 8)));
  EXPECT_EQ(checkpoint::load(file_)[0].second.shape(), Shape{});
}

TEST_F(CheckpointTest, DamagedEntriesAreRefusedWithWhatWasWrong) {
  struct Case {
    std::string bytes;
    ErrorKind kind;
    std::string piece;
  };
  const std::string ok = entry("ok", {1}, "Float32", floats({1}));
  const Case cases[] = {
      {"", ErrorKind::kDataLoss, "holds no tensors"},
      {"\x93NUMPY\x01\x00", ErrorKind::kDataLoss, "not a MindSpore checkpoint"},
      {ok + "garbage", ErrorKind::kDataLoss, "damaged after entry 1"},
      {entry("w", {-1, 2}, "Float32", ""), ErrorKind::kDataLoss, "negative dimension -1"},
      {entry("w", {int64_t{1} << 40, int64_t{1} << 40}, "Float32", ""), ErrorKind::kDataLoss,
       "more than 2^40 elements"},
      {entry("w", {INT64_MAX, INT64_MAX}, "Float32", ""), ErrorKind::kDataLoss,
       "more than 2^40 elements"},
      {entry("w", {int64_t{1} << 30}, "Float64", floats({1})), ErrorKind::kDataLoss,
       "but the whole file has"},
      {entry("w", {3}, "Float32", floats({1, 2})), ErrorKind::kDataLoss, "holds 8 bytes of data"},
      {entry("w", {1}, "Float32", floats({1, 2})), ErrorKind::kDataLoss, "holds more data"},
      {ok + entry("x", {1}, "Float32", floats({1})) + ok, ErrorKind::kDataLoss,
       "repeats the tag of entry 1"},
      {entry("w", {2}, "Float32", floats({1})) + entry("w", {3}, "Float32", floats({1})),
       ErrorKind::kDataLoss, "continues the tensor"},
      {entry("w", {1}, "Float99\x1b[2J", floats({1})), ErrorKind::kDataLoss,
       "unknown tensor_type 'Float99\\x1b[2J'"},
      {entry("w", {1}, "Float16", "ab"), ErrorKind::kUnsupported, "is of type Float16"},
      {entry("w", {1}, "Bool", "\x02"), ErrorKind::kDataLoss, "other than 0 or 1"},
      {entry("", {1}, "Float32", floats({1})), ErrorKind::kDataLoss, "empty tag"},
      {entry("w", std::vector<int64_t>(65, 1), "Float32", floats({1})), ErrorKind::kDataLoss,
       "dims, more than the 64"},
      {std::string("\x0a\xff\xff\xff\xff\x0f", 6), ErrorKind::kDataLoss, "truncated"},
      {std::string("\x0a\x02\x12\x00", 4), ErrorKind::kDataLoss, "not a valid Checkpoint.Value"},
  };
  for (const Case& c : cases) {
    write_bytes(file_, c.bytes);
    expect_error([&] { checkpoint::load(file_); }, c.kind, c.piece);
  }
  // A map tensor (MindSpore's MapParameter) is named, not misread.
  ::Checkpoint map;
  auto* value = map.add_value();
  value->set_tag("table");
  auto* keys = value->mutable_maptensor()->add_tensor();
  keys->add_dims(1);
  keys->set_tensor_type("Int64");
  keys->set_tensor_content(std::string(8, '\0'));
  write_bytes(file_, map.SerializeAsString());
  expect_error([&] { checkpoint::load(file_); }, ErrorKind::kUnsupported, "map tensor");
  // A long tag is cut in the message.
  write_bytes(file_, entry(std::string(100000, 'x'), {1}, "Int8", "a"));
  try {
    checkpoint::load(file_);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 1000u) << e.what();
  }
  expect_error([&] { checkpoint::load(dir_ / "missing.ckpt"); }, ErrorKind::kNotFound, "missing");
  expect_error([&] { checkpoint::load(dir_); }, ErrorKind::kInvalidArgument, "");
}

// Every prefix of a valid file and every single-byte change either loads consistent tensors or is
// refused with mf::Error; none crashes, hangs or allocates what the file does not hold. A file cut
// exactly between two entries is a valid, shorter checkpoint (the format has no count or trailer,
// in MindSpore too): it loads the entries before the cut.
TEST_F(CheckpointTest, TruncatedAndFlippedFilesNeverCrash) {
  checkpoint::save(file_, {{"fc.weight", Tensor::randn({3, 4}, 1)},
                           {"fc.bias", Tensor::from_vector<int64_t>({1, 2, 3}, {3})},
                           {"flag", Tensor::from_vector(std::vector<bool>{true, false}, {2})}});
  const std::string good = read_bytes(file_);
  auto check = [&](const std::string& bytes) {
    write_bytes(file_, bytes);
    try {
      for (const auto& [name, tensor] : checkpoint::load(file_)) {
        EXPECT_FALSE(name.empty());
        EXPECT_EQ(tensor.nbytes(), raw_bytes(tensor).size());
      }
    } catch (const Error& e) {
      EXPECT_NE(e.kind(), ErrorKind::kInternal) << e.what();
    }
  };
  std::vector<size_t> loaded_sizes;
  for (size_t cut = 0; cut < good.size(); ++cut) {
    write_bytes(file_, good.substr(0, cut));
    try {
      loaded_sizes.push_back(checkpoint::load(file_).size());
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kDataLoss) << "cut at " << cut << ": " << e.what();
    }
  }
  EXPECT_EQ(loaded_sizes, (std::vector<size_t>{1, 2}));  // the two cuts between entries
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      std::string bytes = good;
      bytes[i] = char(uint8_t(bytes[i]) ^ flip);
      check(bytes);
    }
  }
}

}  // namespace
}  // namespace mf
