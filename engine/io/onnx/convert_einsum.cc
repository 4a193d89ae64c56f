// ONNX import: Einsum, as registry ops. The equation is parsed into one label per axis ("..."
// becomes labels of its own, aligned from the right as numpy broadcasts them); then, per operand, a
// label repeated within it takes the diagonal (a product with the identity, summed), and a label no
// other operand and not the output uses is summed away; operands are combined left to right by
// one batched matmul each (shared labels still needed later are the batch, the others are
// contracted); the result is transposed into the output's order. Without "->" the output is the
// labels used once, the ellipsis first, then the letters in alphabetical order (numpy's rule).

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/io/onnx/importer_impl.h"

namespace mf::onnx::detail {
namespace {

// One operand's labels, an axis each; ellipsis axes get labels from 'A' + k (Einsum's letters are
// lower and upper case: the ellipsis' are chosen among those the equation does not use).
using Labels = std::vector<char>;

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= s[i];
  return n;
}

}  // namespace

void Importer::add_einsum_converters(ConverterTable& table) {
  add_converters(table, {{"Einsum", &Importer::convert_einsum}});
}

void Importer::convert_einsum() {
  MF_CHECK(opset_ >= 12, InvalidArgument, describe(),
           ": Einsum exists from opset 12 on; the node is malformed");
  std::string equation = attr_string("equation", "");
  equation.erase(std::remove(equation.begin(), equation.end(), ' '), equation.end());
  const size_t arrow = equation.find("->");
  const std::string lhs = equation.substr(0, arrow);
  std::vector<std::string> terms(1);
  for (char c : lhs) {
    if (c == ',') {
      terms.emplace_back();
    } else {
      terms.back() += c;
    }
  }
  const size_t n = size_t(node_->input_size());
  MF_CHECK(terms.size() == n && n >= 1, InvalidArgument, describe(), ": equation '",
           echo(equation, 80), "' has ", terms.size(), " operand(s) for ", n, " input(s)");
  std::vector<Value> xs;
  for (size_t i = 0; i < n; ++i) xs.push_back(input(i));
  const DType t = xs[0].type().dtype;
  for (const Value& v : xs) {
    MF_CHECK(v.type().dtype == t, InvalidArgument, describe(), ": Einsum's inputs differ in dtype");
  }

  // Letters the equation does not use name the ellipsis' axes.
  std::string spare;
  for (char c = 'A'; c <= 'Z'; ++c) {
    if (equation.find(c) == std::string::npos) spare += c;
  }
  const auto valid_letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  size_t ellipsis_rank = 0;
  std::vector<Labels> labels(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& term = terms[i];
    const size_t dots = term.find("...");
    const size_t letters = term.size() - (dots == std::string::npos ? 0 : 3);
    MF_CHECK(letters <= size_t(rank_of(xs[i])), InvalidArgument, describe(), ": operand ", i, " '",
             echo(term, 40), "' does not fit its input's rank ", rank_of(xs[i]));
    const size_t ellipsis = size_t(rank_of(xs[i])) - letters;
    MF_CHECK(dots != std::string::npos || ellipsis == 0, InvalidArgument, describe(), ": operand ",
             i, " '", echo(term, 40), "' has ", letters, " labels for rank ", rank_of(xs[i]));
    MF_CHECK(ellipsis <= spare.size(), Unsupported, describe(), ": too many ellipsis axes");
    ellipsis_rank = std::max(ellipsis_rank, ellipsis);
    for (size_t k = 0; k < term.size(); ++k) {
      if (k == dots) {
        // Right-aligned: the last ellipsis axis of every operand has the same label.
        for (size_t e = 0; e < ellipsis; ++e)
          labels[i].push_back(spare[spare.size() - ellipsis + e]);
        k += 2;
        continue;
      }
      MF_CHECK(valid_letter(term[k]), InvalidArgument, describe(), ": equation '",
               echo(equation, 80), "' has '", echo(std::string(1, term[k]), 4),
               "' where a letter or '...' belongs");
      labels[i].push_back(term[k]);
    }
  }
  std::map<char, int> uses;
  for (const Labels& l : labels) {
    for (char c : l) ++uses[c];
  }
  Labels output;
  if (arrow == std::string::npos) {
    for (size_t e = 0; e < ellipsis_rank; ++e)
      output.push_back(spare[spare.size() - ellipsis_rank + e]);
    for (const auto& [c, count] : uses) {
      if (count == 1 && spare.find(c) == std::string::npos) output.push_back(c);
    }
  } else {
    const std::string rhs = equation.substr(arrow + 2);
    for (size_t k = 0; k < rhs.size(); ++k) {
      if (rhs.compare(k, 3, "...") == 0) {
        for (size_t e = 0; e < ellipsis_rank; ++e)
          output.push_back(spare[spare.size() - ellipsis_rank + e]);
        k += 2;
        continue;
      }
      MF_CHECK(valid_letter(rhs[k]) && uses.count(rhs[k]) &&
                   std::count(output.begin(), output.end(), rhs[k]) == 0,
               InvalidArgument, describe(), ": the output '", echo(rhs, 40),
               "' names a label no operand has, or one twice");
      output.push_back(rhs[k]);
    }
  }
  // Each label's size, checked across operands (1 broadcasts).
  std::map<char, int64_t> size;
  for (size_t i = 0; i < n; ++i) {
    for (size_t a = 0; a < labels[i].size(); ++a) {
      const int64_t d = shape_of(xs[i])[a];
      auto [it, fresh] = size.emplace(labels[i][a], d);
      if (!fresh && it->second != d) {
        MF_CHECK(it->second == 1 || d == 1, InvalidArgument, describe(), ": label '",
                 std::string(1, labels[i][a]), "' has sizes ", it->second, " and ", d);
        it->second = std::max(it->second, d);
      }
    }
  }
  const auto needed_after = [&](size_t i, char c) {
    if (std::count(output.begin(), output.end(), c)) return true;
    for (size_t j = i + 1; j < n; ++j) {
      if (std::count(labels[j].begin(), labels[j].end(), c)) return true;
    }
    return false;
  };
  const auto transpose_to = [&](Value v, const Labels& from, const Labels& to) {
    std::vector<int64_t> perm;
    for (char c : to) perm.push_back(std::find(from.begin(), from.end(), c) - from.begin());
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == int64_t(k);
    return identity ? v : emit("transpose", {v}, {{"perm", perm}});
  };

  // Per operand: broadcast size-1 axes, take diagonals, sum away labels used nowhere else.
  for (size_t i = 0; i < n; ++i) {
    Labels& l = labels[i];
    Shape want;
    for (char c : l) want.push_back(size[c]);
    if (want != shape_of(xs[i])) xs[i] = emit("broadcast_to", {xs[i]}, {{"shape", want}});
    for (size_t a = 0; a < l.size(); ++a) {
      for (size_t b = a + 1; b < l.size(); ++b) {
        if (l[a] != l[b]) continue;
        // diagonal over (a, b): x * I (broadcast on the other axes), summed over b.
        const int64_t d = size[l[a]];
        // The identity mask is d x d bytes: bounded before it is made.
        if (d > (int64_t{1} << 14)) {
          unsupported("a diagonal ('" + std::string(2, l[a]) + "') over an axis of " +
                      std::to_string(d) + " elements; at most 16384 are taken");
        }
        std::vector<uint8_t> eye(size_t(d * d), 0);
        for (int64_t k = 0; k < d; ++k) eye[size_t(k * d + k)] = 1;
        Shape eye_shape(l.size(), 1);
        eye_shape[a] = d;
        eye_shape[b] = d;
        const Value mask =
            emit("cast", {graph_->add_constant({DType::kBool, eye_shape}, eye)}, {{"dtype", t}});
        xs[i] = emit("reduce_sum", {emit("mul", {xs[i], mask})},
                     {{"axes", std::vector<int64_t>{int64_t(b)}}, {"keep_dims", false}});
        l.erase(l.begin() + std::ptrdiff_t(b));
        --b;
      }
    }
    std::vector<int64_t> summed;
    Labels kept;
    for (size_t a = 0; a < l.size(); ++a) {
      const bool elsewhere =
          needed_after(i, l[a]) ||
          std::any_of(labels.begin(), labels.begin() + std::ptrdiff_t(i),
                      [&](const Labels& o) { return std::count(o.begin(), o.end(), l[a]) > 0; });
      if (elsewhere) {
        kept.push_back(l[a]);
      } else {
        summed.push_back(int64_t(a));
      }
    }
    if (!summed.empty()) {
      xs[i] = emit("reduce_sum", {xs[i]}, {{"axes", summed}, {"keep_dims", false}});
      l = kept;
    }
  }

  // Combine left to right.
  Value acc = xs[0];
  Labels acc_labels = labels[0];
  for (size_t i = 1; i < n; ++i) {
    const Labels& other = labels[i];
    Labels batch, left, contract, right;
    for (char c : acc_labels) {
      const bool shared = std::count(other.begin(), other.end(), c) > 0;
      if (!shared) {
        left.push_back(c);
      } else if (needed_after(i, c)) {
        batch.push_back(c);
      } else {
        contract.push_back(c);
      }
    }
    for (char c : other) {
      if (!std::count(acc_labels.begin(), acc_labels.end(), c)) right.push_back(c);
    }
    Labels a_order = batch, b_order = batch;
    a_order.insert(a_order.end(), left.begin(), left.end());
    a_order.insert(a_order.end(), contract.begin(), contract.end());
    b_order.insert(b_order.end(), contract.begin(), contract.end());
    b_order.insert(b_order.end(), right.begin(), right.end());
    Shape sizes_a, sizes_b;
    for (char c : a_order) sizes_a.push_back(size[c]);
    for (char c : b_order) sizes_b.push_back(size[c]);
    const size_t nb = batch.size(), nl = left.size(), nc = contract.size();
    const int64_t pb = product(sizes_a, 0, nb), pl = product(sizes_a, nb, nb + nl),
                  pc = product(sizes_a, nb + nl, sizes_a.size()),
                  pr = product(sizes_b, nb + nc, sizes_b.size());
    // One batch is a plain matmul; more, a batch_matmul over the stacks.
    const Shape a_shape = pb == 1 ? Shape{pl, pc} : Shape{pb, pl, pc};
    const Shape b_shape = pb == 1 ? Shape{pc, pr} : Shape{pb, pc, pr};
    const Value a3 = reshape(transpose_to(acc, acc_labels, a_order), a_shape);
    const Value b3 = reshape(transpose_to(xs[i], other, b_order), b_shape);
    Shape result_shape(sizes_a.begin(), sizes_a.begin() + std::ptrdiff_t(nb + nl));
    for (char c : right) result_shape.push_back(size[c]);
    acc = reshape(emit(pb == 1 ? "matmul" : "batch_matmul", {a3, b3}), result_shape);
    acc_labels = batch;
    acc_labels.insert(acc_labels.end(), left.begin(), left.end());
    acc_labels.insert(acc_labels.end(), right.begin(), right.end());
  }
  // Labels still there but not in the output (a single operand's, already summed): none remain.
  set_output(0, transpose_to(acc, acc_labels, output));
}

}  // namespace mf::onnx::detail
