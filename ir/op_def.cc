#include "ir/op_def.h"

#include <algorithm>
#include <map>
#include <memory>

#include "base/error.h"

namespace mf::ir {

std::string type_to_string(const TensorType& type) {
  std::string out = "<Tensor[";
  out += dtype_name(type.dtype);
  out += "], ";
  out += shape_to_string(type.shape);
  out += ">";
  return out;
}

namespace {

// Meyers singleton: static OpRegistration objects in other translation units may run before any
// namespace-scope map here would be constructed.
std::map<std::string, std::unique_ptr<OpDef>, std::less<>>& registry() {
  static std::map<std::string, std::unique_ptr<OpDef>, std::less<>> ops;
  return ops;
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string types_to_string(std::span<const TensorType> types) {
  std::string out = "(";
  for (size_t i = 0; i < types.size(); ++i) {
    if (i > 0) out += ", ";
    out += type_to_string(types[i]);
  }
  return out + ")";
}

std::string arity_to_string(const OpDef& def) {
  if (def.max_inputs < 0) return detail::str_cat("at least ", def.min_inputs);
  if (def.min_inputs == def.max_inputs) return std::to_string(def.min_inputs);
  return detail::str_cat(def.min_inputs, " to ", def.max_inputs);
}

const OpDef* register_op(OpDef def) {
  auto& ops = registry();
  MF_CHECK(!def.name.empty(), Internal, "an op was registered with an empty name");
  MF_CHECK(ops.find(def.name) == ops.end(), Internal, "op '", def.name,
           "' is registered twice; every op name must be defined in exactly one file");
  // A result with no elements has nothing to compute: the kernel is not called, so no kernel's
  // work can scale with anything but the bytes (a softmax over 2^40 empty rows), and no kernel
  // meets an empty operand it was not written for. Side effects (print) still run.
  if (def.kernel && !def.has(Trait::kSideEffect) && !def.has(Trait::kControlFlow)) {
    def.kernel = [kernel = std::move(def.kernel)](const KernelContext& ctx) {
      bool empty = !ctx.outputs.empty();
      for (const TensorView& out : ctx.outputs) empty = empty && num_elements(out.type.shape) == 0;
      if (!empty) kernel(ctx);
    };
  }
  auto owned = std::make_unique<OpDef>(std::move(def));
  const OpDef* raw = owned.get();
  ops.emplace(raw->name, std::move(owned));
  return raw;
}

}  // namespace

const OpDef* find_op(std::string_view name) {
  auto& ops = registry();
  auto it = ops.find(name);
  return it == ops.end() ? nullptr : it->second.get();
}

const OpDef& get_op(std::string_view name) {
  if (const OpDef* def = find_op(name)) return *def;
  std::vector<std::pair<size_t, std::string_view>> ranked;
  for (const auto& [op_name, def] : registry())
    ranked.emplace_back(edit_distance(name, op_name), op_name);
  std::sort(ranked.begin(), ranked.end());
  std::string hint;
  for (size_t i = 0; i < ranked.size() && i < 3; ++i) {
    hint += i == 0 ? "; did you mean '" : ", '";
    hint += ranked[i].second;
    hint += "'";
  }
  if (!hint.empty()) hint += "?";
  MF_FAIL(NotFound, "unknown op '", name, "'", hint, " (", registry().size(),
          " ops are registered)");
}

std::vector<const OpDef*> all_ops() {
  std::vector<const OpDef*> out;
  for (const auto& [name, def] : registry()) out.push_back(def.get());  // std::map: already sorted
  return out;
}

std::vector<TensorType> OpDef::infer_types(std::span<const TensorType> inputs, Attrs& attrs) const {
  const int n = static_cast<int>(inputs.size());
  MF_CHECK(n >= min_inputs && (max_inputs < 0 || n <= max_inputs), InvalidArgument, "op '", name,
           "' takes ", arity_to_string(*this), " input", (max_inputs == 1 ? "" : "s"), ", got ", n,
           ": ", types_to_string(inputs));
  for (const auto& [attr_name, value] : attrs) {
    auto spec = std::find_if(this->attrs.begin(), this->attrs.end(),
                             [&](const AttrSpec& s) { return s.name == attr_name; });
    if (spec == this->attrs.end()) {
      std::string known;
      for (const auto& s : this->attrs) known += (known.empty() ? "" : ", ") + s.name;
      MF_FAIL(InvalidArgument, "op '", name, "' has no attribute '", attr_name, "' (it has ",
              known.empty() ? std::string("none") : known, ")");
    }
  }
  for (const AttrSpec& spec : this->attrs) {
    auto it = attrs.find(spec.name);
    if (it == attrs.end()) {
      MF_CHECK(spec.default_value.has_value(), InvalidArgument, "op '", name,
               "' requires attribute '", spec.name, "' (", attr_kind_name(spec.kind), ")",
               spec.doc.empty() ? "" : ": ", spec.doc);
      attrs.emplace(spec.name, *spec.default_value);
      continue;
    }
    const AttrKind given = attr_kind(it->second);
    if (given == spec.kind) continue;
    // Widening int -> float (and ints -> floats) loses nothing; text and users write "1" for 1.0.
    if (spec.kind == AttrKind::kFloat && given == AttrKind::kInt) {
      it->second = static_cast<double>(std::get<int64_t>(it->second));
      continue;
    }
    if (spec.kind == AttrKind::kFloats && given == AttrKind::kInts) {
      const auto& ints = std::get<std::vector<int64_t>>(it->second);
      it->second = std::vector<double>(ints.begin(), ints.end());
      continue;
    }
    MF_FAIL(InvalidArgument, "attribute '", spec.name, "' of op '", name, "' is ",
            attr_kind_name(given), ", expected ", attr_kind_name(spec.kind));
  }
  MF_CHECK(static_cast<bool>(infer), Internal, "op '", name, "' has no type inference function");
  std::vector<TensorType> outputs;
  try {
    outputs = infer(inputs, attrs);
  } catch (Error& e) {
    e.add_context(
        detail::str_cat("while inferring op '", name, "' on inputs ", types_to_string(inputs)));
    throw;
  }
  MF_CHECK(num_outputs < 0 || static_cast<int>(outputs.size()) == num_outputs, Internal, "op '",
           name, "' declares ", num_outputs, " outputs but its inference returned ",
           outputs.size());
  // The one check of every inferred shape (graph building, re-inference, parsing, the verifier and
  // op-by-op dispatch all come through here): a negative dimension or a tensor beyond
  // kMaxTensorElements never reaches a kernel or an allocator.
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (try_num_elements(outputs[i].shape).has_value()) continue;
    try {
      checked_num_elements(outputs[i].shape, "");
    } catch (const Error& e) {
      // e.message() starts with ": shape ...".
      MF_FAIL(InvalidArgument, "op '", name, "' on inputs ", types_to_string(inputs),
              " gives output ", i, " of invalid ", std::string_view(e.message()).substr(2),
              "; check the op's attributes and input shapes");
    }
  }
  return outputs;
}

OpRegistration::OpRegistration(OpBuilder& builder) : def_(register_op(builder.def_)) {}
OpRegistration::OpRegistration(OpBuilder&& builder) : def_(register_op(std::move(builder.def_))) {}

}  // namespace mf::ir
