#include "engine/io/checkpoint.h"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "base/file_reader.h"
#include "base/logging.h"
#include "checkpoint.pb.h"

namespace mf::checkpoint {
namespace {

namespace fs = std::filesystem;

// A file is a sequence of Checkpoint.value entries: key 0x0a (field 1, length-delimited), the
// length as a varint, then one serialized Checkpoint.Value. MindSpore appends one such serialized
// Checkpoint per parameter part, which is the same bytes as one Checkpoint holding them all. The
// loader walks the entries itself instead of parsing the whole file as one message: each entry is
// checked before the next is read, and a file beyond protobuf's 2 GiB message limit still loads.
constexpr uint8_t kValueKey = 0x0a;
// protobuf parses no message longer than this; an entry claiming more is damage.
constexpr uint64_t kMaxEntryBytes = (uint64_t{1} << 31) - 1;

struct TypeEntry {
  std::string_view name;
  DType dtype;
};
// MindSpore's names (str(mstype.float32) == "Float32"; serialization.py's tensor_to_ms_type).
constexpr TypeEntry kTypes[] = {{"Float32", DType::kFloat32},
                                {"Float64", DType::kFloat64},
                                {"Int32", DType::kInt32},
                                {"Int64", DType::kInt64},
                                {"Bool", DType::kBool}};
// Types MindSpore writes that modeflow has no dtype for.
constexpr std::string_view kForeignTypes[] = {"Float16", "BFloat16", "Int8",   "Int16", "UInt8",
                                              "UInt16",  "UInt32",   "UInt64", "str"};

std::string dims_text(const google::protobuf::RepeatedField<int64_t>& dims) {
  std::string text = "[";
  for (int i = 0; i < dims.size(); ++i) {
    if (i == 16) {
      text += ", ... (" + std::to_string(dims.size()) + " dims)";
      break;
    }
    text += (i ? ", " : "") + std::to_string(dims[i]);
  }
  return text + "]";
}

// The loader's state: the file, where it is, and the entry being filled. A tag's data may come in
// several consecutive entries (MindSpore's 512 MiB parts); the tensor is allocated once, when its
// first entry has been checked, and each part is copied in place.
class Loader {
 public:
  explicit Loader(const fs::path& file)
      : in_(file, "checkpoint"), name_(echo(file.string())), size_(in_.size()) {
    MF_CHECK(size_ <= kMaxBinaryFileBytes, InvalidArgument, name_, ": the file is ", size_,
             " bytes, more than the ", kMaxBinaryFileBytes >> 30,
             " GiB a checkpoint may have; is it a checkpoint?");
  }

  NamedTensors run() {
    uint64_t pos = 0;
    while (pos < size_) pos = read_entry(pos);
    finish_open();
    MF_CHECK(!out_.empty(), DataLoss, name_,
             ": the checkpoint holds no tensors (an empty file; MindSpore's load_checkpoint "
             "refuses it too): it was written from a net without parameters, or its writing "
             "failed");
    return std::move(out_);
  }

 private:
  struct Open {
    size_t index = 0;  // in out_
    std::string type;
    google::protobuf::RepeatedField<int64_t> dims;
    Tensor tensor;
    uint64_t filled = 0, capacity = 0;
    bool legacy_scalar = false;  // dims [0]: see open_entry
  };

  [[noreturn]] void damaged(uint64_t pos, const std::string& why) const {
    MF_FAIL(DataLoss, name_, ": ",
            entry_ == 0 ? "not a MindSpore checkpoint, or damaged at its start"
                        : "the checkpoint is damaged after entry " + std::to_string(entry_),
            " (byte ", pos, " of ", size_, "): ", why);
  }
  std::string entry_name(const std::string& tag) const {
    return "entry " + std::to_string(entry_ + 1) + " ('" + echo(tag, 80) + "')";
  }

  // Reads one entry starting at `pos`; returns where the next one starts.
  uint64_t read_entry(uint64_t pos) {
    uint8_t head[11] = {};
    const size_t got = in_.read_at(pos, head, size_t(std::min<uint64_t>(sizeof head, size_ - pos)));
    if (head[0] != kValueKey) {
      damaged(pos, "expected an entry (byte 0x0a) but found byte 0x" + hex(head[0]));
    }
    uint64_t length = 0;
    size_t at = 1;
    for (int shift = 0;; shift += 7, ++at) {
      if (at >= got) damaged(pos, "the file ends inside an entry's length");
      if (shift > 63) damaged(pos, "an entry's length is not a valid varint");
      length |= uint64_t(head[at] & 0x7f) << shift;
      if ((head[at] & 0x80) == 0) break;
    }
    const uint64_t body = pos + at + 1;
    if (length > size_ - body) {
      damaged(pos, "an entry of " + std::to_string(length) + " bytes is declared but only " +
                       std::to_string(size_ - body) + " remain: the file is truncated");
    }
    if (length > kMaxEntryBytes) damaged(pos, "an entry is longer than protobuf's 2 GiB limit");
    std::string bytes(size_t(length), '\0');
    MF_CHECK(in_.read_at(body, bytes.data(), bytes.size()) == bytes.size(), DataLoss, name_,
             ": the file shrank while it was read; load it again");
    ::Checkpoint::Value value;
    const google::protobuf::LogSilencer quiet;  // damage is reported once, as DataLoss
    if (!value.ParseFromString(bytes)) {
      damaged(pos, "entry " + std::to_string(entry_ + 1) +
                       " is not a valid Checkpoint.Value (it needs a tag and a tensor with its "
                       "tensor_type and tensor_content)");
    }
    take(value);
    ++entry_;
    return body + length;
  }

  static std::string hex(uint8_t byte) {
    static constexpr char kDigits[] = "0123456789abcdef";
    return {kDigits[byte >> 4], kDigits[byte & 15]};
  }

  void take(const ::Checkpoint::Value& value) {
    const std::string& tag = value.tag();
    MF_CHECK(!tag.empty(), DataLoss, name_, ": entry ", entry_ + 1,
             " has an empty tag: the file is damaged");
    MF_CHECK(!value.has_maptensor(), Unsupported, name_, ": ", entry_name(tag),
             " is a map tensor (MindSpore's MapParameter); modeflow has no map tensors");
    MF_CHECK(value.has_tensor(), DataLoss, name_, ": ", entry_name(tag),
             " holds no tensor: the file is damaged");
    const ::TensorProto& tensor = value.tensor();
    if (open_ && out_[open_->index].first == tag) return continue_open(tag, tensor);
    finish_open();
    const auto [seen, fresh] = index_.emplace(tag, out_.size());
    MF_CHECK(fresh, DataLoss, name_, ": ", entry_name(tag), " repeats the tag of entry ",
             first_entry_[seen->second] + 1,
             " (only consecutive entries may share a tag, as parts of one tensor): the file is "
             "damaged");
    open_entry(tag, tensor);
  }

  DType dtype_for(const std::string& tag, const std::string& type) const {
    if (auto dtype = dtype_of_type_name(type)) return *dtype;
    const bool foreign = std::find(std::begin(kForeignTypes), std::end(kForeignTypes), type) !=
                         std::end(kForeignTypes);
    MF_CHECK(!foreign, Unsupported, name_, ": ", entry_name(tag), " is of type ", type,
             ", which modeflow has no dtype for (it has Float32, Float64, Int32, Int64 and Bool); "
             "cast the parameter in MindSpore before saving");
    MF_FAIL(DataLoss, name_, ": ", entry_name(tag), " has the unknown tensor_type '",
            echo(type, 40),
            "' (MindSpore writes names such as Float32, Int64, Bool): the file is damaged");
  }

  void open_entry(const std::string& tag, const ::TensorProto& proto) {
    const DType dtype = dtype_for(tag, proto.tensor_type());
    const auto& dims = proto.dims();
    MF_CHECK(dims.size() <= ir::kMaxRank, DataLoss, name_, ": ", entry_name(tag), " has ",
             dims.size(), " dims, more than the ", ir::kMaxRank, " a tensor may have");
    Shape shape;
    int64_t count = 1;
    for (int64_t d : dims) {
      MF_CHECK(d >= 0, DataLoss, name_, ": ", entry_name(tag), " has the negative dimension ", d,
               " in dims ", dims_text(dims));
      const auto next = ir::checked_mul(count, d);
      MF_CHECK(next && *next <= ir::kMaxTensorElements, DataLoss, name_, ": ", entry_name(tag),
               " has dims ", dims_text(dims),
               " of more than 2^40 elements, the largest tensor supported: the file is damaged");
      count = *next;
      shape.push_back(d);
    }
    MF_CHECK(ir::try_num_elements(shape).has_value(), DataLoss, name_, ": ", entry_name(tag),
             " has dims ", dims_text(dims), ", which no tensor can have");
    Open open;
    open.index = out_.size();
    open.type = proto.tensor_type();
    open.dims = dims;
    // MindSpore's loader reads dims [0] with one element of data as a scalar (its old encoding
    // of a number); with no data it is a shape (0,) tensor. Which one is known at the end.
    open.legacy_scalar = dims.size() == 1 && dims[0] == 0;
    if (open.legacy_scalar) shape.clear();
    open.capacity = uint64_t(ir::num_elements(shape)) * ir::dtype_size(dtype);
    // Checked before allocating: dims of a gigabyte-sized tensor in a file of a few bytes are
    // damage, never an allocation.
    MF_CHECK(open.capacity <= size_, DataLoss, name_, ": ", entry_name(tag), " has dims ",
             dims_text(dims), " of ", ir::dtype_name(dtype), ", which need ", open.capacity,
             " bytes, but the whole file has ", size_);
    open.tensor = Tensor::empty(shape, dtype);
    out_.emplace_back(tag, open.tensor);
    first_entry_.push_back(entry_);
    open_ = std::move(open);
    append(tag, proto.tensor_content());
  }

  void continue_open(const std::string& tag, const ::TensorProto& proto) {
    const bool same_dims = std::equal(proto.dims().begin(), proto.dims().end(), open_->dims.begin(),
                                      open_->dims.end());
    MF_CHECK(proto.tensor_type() == open_->type && same_dims, DataLoss, name_, ": ",
             entry_name(tag), " continues the tensor of the entry before it with different dims ",
             dims_text(proto.dims()), " or type '", echo(proto.tensor_type(), 40),
             "' (parts of one tensor repeat its dims ", dims_text(open_->dims), " and type ",
             open_->type, "): the file is damaged");
    append(tag, proto.tensor_content());
  }

  void append(const std::string& tag, const std::string& content) {
    MF_CHECK(content.size() <= open_->capacity - open_->filled, DataLoss, name_, ": ",
             entry_name(tag), " holds more data than its dims ", dims_text(open_->dims), " of ",
             open_->type, " need (", open_->capacity, " bytes): the file is damaged");
    if (!content.empty()) {
      std::memcpy(static_cast<uint8_t*>(open_->tensor.mutable_raw_data()) + open_->filled,
                  content.data(), content.size());
    }
    open_->filled += content.size();
  }

  void finish_open() {
    if (!open_) return;
    Open open = std::move(*open_);
    open_.reset();
    auto& [tag, tensor] = out_[open.index];
    if (open.legacy_scalar && open.filled == 0) {
      tensor = Tensor::empty({0}, tensor.dtype());
      return;
    }
    MF_CHECK(open.filled == open.capacity, DataLoss, name_, ": the tensor '", echo(tag, 80),
             "' holds ", open.filled, " bytes of data, but its dims ", dims_text(open.dims), " of ",
             open.type, " need ", open.capacity, ": the file is damaged");
    if (tensor.dtype() == DType::kBool) {
      const auto* bytes = static_cast<const uint8_t*>(tensor.raw_data());
      MF_CHECK(std::all_of(bytes, bytes + open.filled, [](uint8_t b) { return b <= 1; }), DataLoss,
               name_, ": the Bool tensor '", echo(tag, 80),
               "' holds a byte other than 0 or 1: the file is damaged");
    }
  }

  RegularFile in_;
  std::string name_;
  uint64_t size_;
  uint64_t entry_ = 0;  // entries read so far
  NamedTensors out_;
  std::vector<uint64_t> first_entry_;  // per out_ element: its first entry
  std::unordered_map<std::string, size_t> index_;
  std::optional<Open> open_;
};

bool is_integer(DType dtype) {
  return dtype == DType::kInt32 || dtype == DType::kInt64;
}

// `value` converted element by element to `dtype` (host memory: a checkpoint value is not an op).
Tensor cast_on_host(const Tensor& value, DType dtype) {
  Tensor out = Tensor::empty(value.shape(), dtype);
  const int64_t n = value.numel();
  ir::visit_dtype(value.dtype(), [&](auto from) {
    using From = decltype(from);
    const From* src = static_cast<const From*>(value.raw_data());
    ir::visit_dtype(dtype, [&](auto to) {
      using To = decltype(to);
      To* dst = static_cast<To*>(out.mutable_raw_data());
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<To>(src[i]);
    });
  });
  return out;
}

// The checkpoint's value for one net parameter, checked and brought to the parameter's type.
Tensor value_for(const std::string& name, const Tensor& current, const Tensor& given,
                 bool strict_load) {
  MF_CHECK(given.defined(), InvalidArgument, "load_param_into_net: the value for '", echo(name),
           "' is an undefined tensor");
  Tensor value = given;
  const Shape& want = current.shape();
  const Shape& have = value.shape();
  if (have != want) {
    // MindSpore's allowance (_special_process_par): extra trailing axes of size 1, as some
    // backends keep a (N, C) weight as (N, C, 1, 1).
    const bool trailing_ones =
        have.size() > want.size() && std::equal(want.begin(), want.end(), have.begin()) &&
        std::all_of(have.begin() + want.size(), have.end(), [](int64_t d) { return d == 1; });
    MF_CHECK(trailing_ones, InvalidArgument, "load_param_into_net: parameter '", echo(name),
             "' has shape ", ir::shape_to_string(want), " in the net but ",
             ir::shape_to_string(have),
             " in the checkpoint; check that the checkpoint was saved from this network (layer "
             "sizes, class count)");
    value = Tensor::from_bytes(value.dtype(), want, value.raw_data());
  }
  if (value.dtype() != current.dtype()) {
    const DType a = value.dtype(), b = current.dtype();
    const bool castable =
        (ir::is_floating(a) && ir::is_floating(b)) || (is_integer(a) && is_integer(b));
    MF_CHECK(!strict_load && castable, InvalidArgument, "load_param_into_net: parameter '",
             echo(name), "' is ", ir::dtype_name(b), " in the net but ", ir::dtype_name(a),
             " in the checkpoint; ",
             strict_load ? "strict_load=True requires the same type (pass strict_load=False to "
                           "cast float to float and integer to integer)"
                         : "only float-to-float and integer-to-integer values are cast");
    log::warn(
        "load_param_into_net: parameter '{}' is {} in the checkpoint and {} in the net; it is "
        "cast to {}",
        echo(name), ir::dtype_name(a), ir::dtype_name(b), ir::dtype_name(b));
    value = cast_on_host(value, b);
  }
  return value;
}

}  // namespace

std::string_view type_name(DType dtype) {
  for (const auto& entry : kTypes) {
    if (entry.dtype == dtype) return entry.name;
  }
  MF_FAIL(Internal, "no checkpoint tensor_type for dtype ", ir::dtype_name(dtype));
}

std::optional<DType> dtype_of_type_name(std::string_view name) {
  for (const auto& entry : kTypes) {
    if (entry.name == name) return entry.dtype;
  }
  return std::nullopt;
}

void save(const fs::path& file, const NamedTensors& named) {
  std::unordered_set<std::string_view> names;
  for (size_t i = 0; i < named.size(); ++i) {
    const auto& [name, tensor] = named[i];
    MF_CHECK(!name.empty(), InvalidArgument, "save_checkpoint: tensor ", i,
             " has an empty name; every entry of a checkpoint needs one");
    MF_CHECK(names.insert(name).second, InvalidArgument, "save_checkpoint: the name '", echo(name),
             "' is given twice; names must be unique (a checkpoint maps each name to one tensor)");
    MF_CHECK(tensor.defined(), InvalidArgument, "save_checkpoint: '", echo(name),
             "' is an undefined tensor");
  }
  std::string out;
  for (const auto& [name, tensor] : named) {
    const auto* data = static_cast<const char*>(tensor.raw_data());  // waits for the tensor
    const size_t bytes = tensor.nbytes();
    ::Checkpoint record;
    ::Checkpoint::Value* value = record.add_value();
    value->set_tag(name);
    ::TensorProto* proto = value->mutable_tensor();
    for (int64_t d : tensor.shape()) proto->add_dims(d);
    proto->set_tensor_type(std::string(type_name(tensor.dtype())));
    // One entry per part of at most kChunkBytes, as MindSpore writes; an empty tensor still gets
    // its one entry (MindSpore writes none: its loop over parts runs zero times).
    size_t at = 0;
    do {
      const size_t n = std::min(kChunkBytes, bytes - at);
      proto->set_tensor_content(data + at, n);
      record.AppendToString(&out);
      at += n;
    } while (at < bytes);
  }
  write_file_atomically(file, out, "checkpoint");
}

void save(const fs::path& file, const nn::Cell& net) {
  save(file, net.named_parameters());
}

NamedTensors load(const fs::path& file) {
  return Loader(file).run();
}

LoadReport load_param_into_net(nn::Cell& net, const NamedTensors& params, bool strict_load) {
  std::unordered_map<std::string_view, size_t> by_name;
  for (size_t i = 0; i < params.size(); ++i) {
    MF_CHECK(by_name.emplace(params[i].first, i).second, InvalidArgument,
             "load_param_into_net: the name '", echo(params[i].first),
             "' is given twice; each parameter needs one value");
  }
  const NamedTensors named = net.named_parameters();
  NamedTensors updates;
  std::vector<bool> used(params.size(), false);
  std::vector<size_t> missing;  // into named, in order
  auto take = [&](size_t k, size_t j) {
    updates.emplace_back(named[k].first,
                         value_for(named[k].first, named[k].second, params[j].second, strict_load));
    used[j] = true;
  };
  for (size_t k = 0; k < named.size(); ++k) {
    const auto it = by_name.find(named[k].first);
    if (it == by_name.end()) {
      missing.push_back(k);
    } else {
      take(k, it->second);
    }
  }
  // MindSpore's _load_dismatch_prefix_params: the first missing parameter whose name ends some
  // checkpoint name gives a prefix ("backbone." for "fc.weight" in "backbone.fc.weight"); every
  // missing parameter found under that prefix is taken; repeated while a prefix takes one.
  while (!missing.empty() && !strict_load) {
    std::optional<std::string> prefix;
    for (size_t k : missing) {
      const std::string& want = named[k].first;
      for (const auto& [have, _] : params) {
        if (have.size() > want.size() && have.ends_with(want)) {
          prefix = have.substr(0, have.size() - want.size());
          break;
        }
      }
      if (prefix) break;
    }
    if (!prefix) break;
    log::warn(
        "load_param_into_net: net parameters not in the checkpoint are looked up under the "
        "prefix '{}'",
        echo(*prefix));
    std::vector<size_t> still_missing;
    for (size_t k : missing) {
      const auto it = by_name.find(*prefix + named[k].first);
      if (it == by_name.end()) {
        still_missing.push_back(k);
      } else {
        take(k, it->second);
      }
    }
    if (still_missing.size() == missing.size()) break;  // no progress: never loops forever
    missing = std::move(still_missing);
  }
  // Every value is checked: now the net changes, all at once.
  for (const auto& [name, value] : updates) net.set_parameter(name, value);

  LoadReport report;
  for (size_t k : missing) report.param_not_load.push_back(named[k].first);
  for (size_t j = 0; j < params.size(); ++j) {
    if (!used[j]) report.ckpt_not_load.push_back(params[j].first);
  }
  if (!report.param_not_load.empty()) {
    log::warn(
        "load_param_into_net: {} parameters of the net are not in the checkpoint and keep "
        "their values (the first: '{}')",
        report.param_not_load.size(), echo(report.param_not_load.front()));
  }
  return report;
}

}  // namespace mf::checkpoint
