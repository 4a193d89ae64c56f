#include "ir/parser.h"

#include "ir/input_signature.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "base/error.h"
#include "base/file_reader.h"

namespace mf::ir {

namespace {

// How deep subgraphs may nest in IR text (@main/a/b/... has depth 2 at b).
constexpr std::ptrdiff_t kMaxSubgraphNesting = 256;

enum class Tok : uint8_t {
  kEnd,
  kIdent,     // subgraph, matmul, Float32, true
  kValueRef,  // %para1_x, %const2, %7, %7.1
  kGraphRef,  // @mlp, @body/inner
  kInt,
  kFloat,  // 2.5, -1e-05, inf, -nan
  kString,
  kComment,  // '#' to the end of the line
  kLParen,
  kRParen,
  kLBrace,
  kRBrace,
  kLBracket,
  kRBracket,
  kLess,
  kGreater,
  kComma,
  kColon,
  kEquals,
  kArrow,
  kStar,      // '*' between the factors of a symbolic size: `4 * batch`
  kQuestion,  // '?': an unnamed dynamic dimension
};

struct Token {
  Tok kind = Tok::kEnd;
  std::string_view text;
  int line = 1;
  int col = 1;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEnd:
      return "end of file";
    case Tok::kComment:
      return "a comment";
    case Tok::kString:
      return "a string";
    default:
      break;
  }
  std::string text(t.text.substr(0, 40));
  if (t.text.size() > 40) text += "...";
  return "'" + text + "'";
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Splits the text into tokens up front; comments stay in the stream because scope and location
// lines are comments that belong to the node before them.
class Lexer {
 public:
  Lexer(std::string_view text, std::string_view file) : text_(text), file_(file) {}

  std::vector<Token> run() {
    std::vector<Token> tokens;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_;
      t.col = col_;
      if (pos_ >= text_.size()) {
        tokens.push_back(t);
        return tokens;
      }
      const size_t start = pos_;
      const char c = text_[pos_];
      t.kind = lex_one(c, t);
      t.text = text_.substr(start, pos_ - start);
      tokens.push_back(t);
    }
  }

 private:
  [[noreturn]] void fail(int line, int col, const std::string& message) const {
    MF_FAIL(InvalidArgument, echo(file_), ":", line, ":", col, ": ", echo(message, 400));
  }

  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      advance();
  }
  bool at_word(std::string_view word) const {
    return text_.substr(pos_, word.size()) == word &&
           !is_name_char(pos_ + word.size() < text_.size() ? text_[pos_ + word.size()] : ' ');
  }

  Tok lex_one(char c, const Token& t) {
    switch (c) {
      case '(':
        advance();
        return Tok::kLParen;
      case ')':
        advance();
        return Tok::kRParen;
      case '{':
        advance();
        return Tok::kLBrace;
      case '}':
        advance();
        return Tok::kRBrace;
      case '[':
        advance();
        return Tok::kLBracket;
      case ']':
        advance();
        return Tok::kRBracket;
      case '<':
        advance();
        return Tok::kLess;
      case '>':
        advance();
        return Tok::kGreater;
      case ',':
        advance();
        return Tok::kComma;
      case ':':
        advance();
        return Tok::kColon;
      case '=':
        advance();
        return Tok::kEquals;
      case '*':
        advance();
        return Tok::kStar;
      case '?':
        advance();
        return Tok::kQuestion;
      case '#':
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
        return Tok::kComment;
      case '"':
        return lex_string(t);
      case '%':
      case '@': {
        advance();
        const size_t start = pos_;
        while (is_name_char(peek()) || peek() == '.' || (c == '@' && peek() == '/')) advance();
        if (pos_ == start) {
          fail(t.line, t.col,
               detail::str_cat("expected a name after '", c, "', found ",
                               peek() == '\0' ? std::string("end of file")
                                              : detail::str_cat("'", peek(), "'")));
        }
        return c == '%' ? Tok::kValueRef : Tok::kGraphRef;
      }
      default:
        break;
    }
    if (c == '-' && peek(1) == '>') {
      advance();
      advance();
      return Tok::kArrow;
    }
    if (is_digit(c) ||
        ((c == '-' || c == '+') && (is_digit(peek(1)) || peek(1) == 'i' || peek(1) == 'n'))) {
      return lex_number(t);
    }
    if (is_name_char(c)) {
      const bool special = at_word("inf") || at_word("nan");
      while (is_name_char(peek())) advance();
      return special ? Tok::kFloat : Tok::kIdent;
    }
    const auto u = static_cast<unsigned char>(c);
    fail(t.line, t.col,
         u >= 0x20 && u < 0x7f
             ? detail::str_cat("expected a token, found '", c, "'")
             : detail::str_cat("expected a token, found byte 0x", std::hex, static_cast<int>(u)));
  }

  Tok lex_number(const Token& t) {
    bool is_float = false;
    if (peek() == '-' || peek() == '+') advance();
    if (at_word("inf") || at_word("nan")) {
      for (int i = 0; i < 3; ++i) advance();
      return Tok::kFloat;
    }
    if (!is_digit(peek())) fail(t.line, t.col, "expected a number");
    while (is_digit(peek())) advance();
    if (peek() == '.') {
      is_float = true;
      advance();
      while (is_digit(peek())) advance();
    }
    if (peek() == 'e' || peek() == 'E') {
      is_float = true;
      advance();
      if (peek() == '-' || peek() == '+') advance();
      if (!is_digit(peek())) {
        fail(line_, col_,
             detail::str_cat(
                 "expected exponent digits, found ",
                 peek() == '\0' ? std::string("end of file") : detail::str_cat("'", peek(), "'")));
      }
      while (is_digit(peek())) advance();
    }
    if (is_name_char(peek())) {
      fail(line_, col_,
           detail::str_cat("expected a delimiter after a number, found '", peek(), "'"));
    }
    return is_float ? Tok::kFloat : Tok::kInt;
  }

  Tok lex_string(const Token& t) {
    advance();
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') {
        fail(line_, col_,
             pos_ >= text_.size()
                 ? "expected '\"' to close the string started at " + std::to_string(t.line) + ":" +
                       std::to_string(t.col) + ", found end of file"
                 : "expected '\"' to close the string started at " + std::to_string(t.line) + ":" +
                       std::to_string(t.col) + ", found end of line");
      }
      if (text_[pos_] == '\\') {
        advance();
        if (pos_ >= text_.size()) continue;  // reported as unterminated above
        advance();
        continue;
      }
      if (text_[pos_] == '"') {
        advance();
        return Tok::kString;
      }
      advance();
    }
  }

  std::string_view text_;
  std::string_view file_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

// One `subgraph @name(...) { ... }` block at a time, building straight into the Graph.
class Parser {
 public:
  using SymbolValues = ir::SymbolValues;
  Parser(std::vector<Token> tokens, std::string_view file, const ParseBinding& binding)
      : tokens_(std::move(tokens)), file_(file), binding_(binding) {}

  std::unique_ptr<Graph> parse_module() {
    std::unique_ptr<Graph> root;
    std::unordered_map<std::string, Graph*> by_path;
    // The printer's first line, "# IR entry: @name", when the file has it: it must name the graph
    // that runs (the first one), or the file says one thing and runs another.
    std::optional<Token> entry_line;
    for (size_t i = 0; i < tokens_.size() && tokens_[i].kind == Tok::kComment; ++i) {
      constexpr std::string_view kEntry = "# IR entry: @";
      if (tokens_[i].text.substr(0, kEntry.size()) == kEntry) {
        entry_line = tokens_[i];
        break;
      }
    }
    do {
      expect_word("subgraph");
      const Token& ref = expect(Tok::kGraphRef, "a graph name such as '@main'");
      std::string path(ref.text.substr(1));
      Graph* graph = nullptr;
      if (!root) {
        if (path.find('/') != std::string::npos) fail_at(ref, "the entry graph's name has no '/'");
        check_graph_name(ref, path);
        if (entry_line) {
          std::string_view named =
              entry_line->text.substr(std::string_view("# IR entry: @").size());
          while (!named.empty() && (named.back() == ' ' || named.back() == '\r')) {
            named.remove_suffix(1);
          }
          if (named != path) {
            fail_at(*entry_line, "the entry line names @" + echo(std::string(named), 80) +
                                     " but the first subgraph, the one that runs, is @" + path +
                                     ": make them agree");
          }
        }
        root = std::make_unique<Graph>(path);
        graph = root.get();
      } else {
        const size_t slash = path.rfind('/');
        // Subgraphs own their subgraphs: printing, verifying and destroying a graph recurse once
        // per level, so the nesting is bounded.
        if (std::count(path.begin(), path.end(), '/') >= kMaxSubgraphNesting) {
          fail_at(ref, detail::str_cat("subgraphs nested at most ", kMaxSubgraphNesting,
                                       " deep, found @", echo(path, 80)));
        }
        Graph* parent = root.get();
        std::string name = path;
        if (slash != std::string::npos) {
          auto it = by_path.find(path.substr(0, slash));
          if (it == by_path.end()) {
            fail_at(ref, "expected the parent @" + path.substr(0, slash) +
                             " to be defined before its subgraph @" + path);
          }
          parent = it->second;
          name = path.substr(slash + 1);
        }
        if (by_path.count(path) != 0 || parent->find_subgraph(name) != nullptr ||
            path == root->name()) {
          fail_at(ref, "subgraph @" + path + " is defined twice" +
                           (path == root->name() ? " (the first @" + path + " is the entry)" : ""));
        }
        check_graph_name(ref, name);
        graph = parent->add_subgraph(name);
        by_path[path] = graph;
      }
      parse_block(*graph);
    } while (peek().kind != Tok::kEnd);
    return root;
  }

 private:
  [[noreturn]] void fail_at(const Token& t, const std::string& message) const {
    // Messages quote the input: cut so a hostile file never makes an error of hundreds of KB.
    MF_FAIL(InvalidArgument, echo(file_), ":", t.line, ":", t.col, ": ", echo(message, 400));
  }

  // Comments are skipped everywhere except where a node's scope/location lines are read.
  void skip_comments() {
    while (tokens_[pos_].kind == Tok::kComment) ++pos_;
  }
  const Token& peek() {
    skip_comments();
    return tokens_[pos_];
  }
  // The token `ahead` places after peek(), comments skipped.
  const Token& peek(size_t ahead) {
    skip_comments();
    size_t i = pos_;
    while (ahead > 0 && tokens_[i].kind != Tok::kEnd) {
      ++i;
      if (tokens_[i].kind != Tok::kComment) --ahead;
    }
    return tokens_[i];
  }
  const Token& next() {
    skip_comments();
    const Token& t = tokens_[pos_];
    if (t.kind != Tok::kEnd) ++pos_;
    return t;
  }
  const Token& expect(Tok kind, std::string_view what) {
    const Token& t = peek();
    if (t.kind != kind) fail_at(t, detail::str_cat("expected ", what, ", found ", describe(t)));
    return next();
  }
  const Token& expect_word(std::string_view word) {
    const Token& t = peek();
    if (t.kind != Tok::kIdent || t.text != word) {
      fail_at(t, detail::str_cat("expected '", word, "', found ", describe(t)));
    }
    return next();
  }
  bool accept(Tok kind) {
    if (peek().kind != kind) return false;
    next();
    return true;
  }

  void check_graph_name(const Token& at, const std::string& name) const {
    if (!is_valid_ir_name(name)) {
      fail_at(at, "expected a graph name of letters, digits, '_' and '.', found '" + name + "'");
    }
  }

  struct ParsedType {
    TensorType type;
    bool is_ref = false;
    Token at;
    // Symbolic dimensions: as declared, and which are '?' (inferred, not checked).
    bool symbolic = false;
    SymbolicShape declared;
    std::vector<bool> unknown;
  };

  // A size: an integer, or a product of integers and symbols (`4 * batch`) evaluated with the
  // symbols bound so far, or '?'. `unbound` names a symbol nothing bound yet.
  struct ParsedSize {
    int64_t value = 0;
    bool question = false;
    bool expression = false;  // more than one integer or symbol
    std::string symbol;       // the one symbol of a plain symbolic size
    std::string unbound;
    Token at;
  };

  ParsedSize parse_size(bool allow_negative) {
    ParsedSize out;
    out.at = peek();
    if (accept(Tok::kQuestion)) {
      out.question = true;
      return out;
    }
    int64_t value = 1;
    size_t factors = 0;
    std::vector<std::string> symbols;
    do {
      const Token& t = peek();
      ++factors;
      if (t.kind == Tok::kInt) {
        const int64_t v = parse_int_token(next());
        if (v < 0 && !(allow_negative && factors == 1 && peek().kind != Tok::kStar)) {
          fail_at(t, "expected a dimension >= 0, found " + describe(t));
        }
        const std::optional<int64_t> product = checked_mul(value, v);
        if (!product) fail_at(t, "expected a size that fits 64 bits");
        value = *product;
      } else if (t.kind == Tok::kIdent) {
        symbols.emplace_back(next().text);
      } else {
        fail_at(t, "expected a size, a symbol or '?', found " + describe(t));
      }
    } while (accept(Tok::kStar));
    out.expression = factors > 1;
    if (symbols.size() == 1 && factors == 1) out.symbol = symbols[0];
    for (const std::string& symbol : symbols) {
      const auto it = symbols_.find(symbol);
      if (it == symbols_.end()) {
        out.unbound = symbol;
        return out;
      }
      const std::optional<int64_t> product = checked_mul(value, it->second);
      if (!product || *product > kMaxTensorElements) {
        fail_at(out.at, "expected a size of at most 2^40, found " + symbol + " = " +
                            std::to_string(it->second) + " in a larger product");
      }
      value = *product;
    }
    out.value = value;
    return out;
  }

  // A size that must have a value here (an attribute, a constant, a node's type).
  int64_t bound_size(const ParsedSize& size, std::string_view where) {
    if (size.question) {
      fail_at(size.at, detail::str_cat("'?' in ", where,
                                       " cannot be bound: name the input's dimension instead"));
    }
    if (!size.unbound.empty()) {
      fail_at(size.at, detail::str_cat("symbol '", echo(size.unbound, 64), "' in ", where,
                                       " is not a dimension of an input of the entry graph"));
    }
    return size.value;
  }

  DType parse_dtype_token() {
    const Token& t = peek();
    if (t.kind == Tok::kIdent) {
      if (auto d = parse_dtype(t.text)) {
        next();
        return *d;
      }
    }
    fail_at(t, "expected a dtype (Float32, Float64, Int32, Int64, Bool), found " + describe(t));
  }

  int64_t parse_int_token(const Token& t) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (t.text.starts_with('+')) {
      auto r = std::from_chars(t.text.data() + 1, t.text.data() + t.text.size(), v);
      end = r.ptr, ec = r.ec;
    }
    if (ec != std::errc() || end != t.text.data() + t.text.size()) {
      fail_at(t, "expected a 64-bit integer, found " + describe(t));
    }
    return v;
  }

  template <typename T>
  T parse_float_text(const Token& t) {
    std::string_view s = t.text;
    if (s.starts_with('+')) s.remove_prefix(1);
    T v{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    // Out-of-range magnitudes round to inf/0 as strtod would; anything else unparsable is an error.
    if (ec == std::errc::result_out_of_range) {
      if constexpr (std::is_same_v<T, float>) {
        return static_cast<float>(std::strtod(std::string(s).c_str(), nullptr));
      } else {
        return std::strtod(std::string(s).c_str(), nullptr);
      }
    }
    if (ec != std::errc() || end != s.data() + s.size()) {
      fail_at(t, "expected a floating-point number, found " + describe(t));
    }
    return v;
  }

  ParsedType parse_type(bool allow_ref) {
    ParsedType out;
    out.at = peek();
    expect(Tok::kLess, "a type such as '<Tensor[Float32], (2, 3)>'");
    const Token& head = peek();
    if (head.kind == Tok::kIdent && head.text == "Ref" && allow_ref) {
      next();
      out.is_ref = true;
      expect(Tok::kLBracket, "'['");
    } else if (head.kind != Tok::kIdent || head.text != "Tensor") {
      fail_at(head, detail::str_cat("expected ", allow_ref ? "'Tensor' or 'Ref'" : "'Tensor'",
                                    ", found ", describe(head)));
    }
    expect_word("Tensor");
    expect(Tok::kLBracket, "'['");
    out.type.dtype = parse_dtype_token();
    expect(Tok::kRBracket, "']'");
    if (out.is_ref) expect(Tok::kRBracket, "']'");
    expect(Tok::kComma, "','");
    expect(Tok::kLParen, "'(' to start a shape");
    int64_t elements = 1;
    if (!accept(Tok::kRParen)) {
      do {
        const ParsedSize size = parse_size(false);
        const Token& d = size.at;
        if (static_cast<int64_t>(out.type.shape.size()) >= kMaxRank) {
          fail_at(d, detail::str_cat("expected a shape of at most ", kMaxRank, " axes"));
        }
        const bool symbolic = size.question || size.expression || !size.symbol.empty();
        out.symbolic |= symbolic;
        out.unknown.push_back(size.question || !size.unbound.empty());
        if (size.question) {
          out.declared.push_back({-1, ""});
        } else if (!size.symbol.empty()) {
          out.declared.push_back({-1, size.symbol});
        } else {
          out.declared.push_back({size.expression ? -1 : size.value, ""});
        }
        const int64_t dim = out.unknown.back() ? 0 : size.value;
        if (dim > 0 && elements > kMaxTensorElements / dim) {
          fail_at(d,
                  "expected a shape of at most 2^40 elements (the largest tensor supported), "
                  "found a larger one");
        }
        elements *= dim == 0 ? 1 : dim;
        out.type.shape.push_back(dim);
      } while (accept(Tok::kComma));
      expect(Tok::kRParen, "',' or ')'");
    }
    expect(Tok::kGreater, "'>'");
    return out;
  }

  std::vector<ParsedType> parse_type_list() {
    std::vector<ParsedType> out;
    expect(Tok::kLParen, "'(' to start a list of types");
    if (accept(Tok::kRParen)) return out;
    do out.push_back(parse_type(false));
    while (accept(Tok::kComma));
    expect(Tok::kRParen, "',' or ')'");
    return out;
  }

  std::string decode_string(const Token& t) {
    std::string out;
    std::string_view s = t.text.substr(1, t.text.size() - 2);
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\') {
        out += s[i];
        continue;
      }
      const char e = ++i < s.size() ? s[i] : '\0';
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case 'x': {
          auto hex = [](char c) -> int {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
          };
          const int hi = i + 1 < s.size() ? hex(s[i + 1]) : -1;
          const int lo = i + 2 < s.size() ? hex(s[i + 2]) : -1;
          if (hi < 0 || lo < 0) fail_at(t, "expected two hex digits after '\\x' in a string");
          out += static_cast<char>(hi * 16 + lo);
          i += 2;
          break;
        }
        default:
          fail_at(t,
                  detail::str_cat("expected an escape (\\n \\t \\r \\\" \\\\ \\xHH) in a string, "
                                  "found '\\",
                                  e, "'"));
      }
    }
    return out;
  }

  AttrValue parse_attr_value() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::kInt:
        if (peek(1).kind != Tok::kStar) return parse_int_token(next());
        return bound_size(parse_size(false), "an attribute");
      case Tok::kFloat:
        return parse_float_text<double>(next());
      case Tok::kString:
        return decode_string(next());
      case Tok::kIdent:
        if (t.text == "true" || t.text == "false") return next().text == "true";
        if (auto d = parse_dtype(t.text)) {
          next();
          return *d;
        }
        return bound_size(parse_size(false), "an attribute");
      case Tok::kQuestion:
        return bound_size(parse_size(false), "an attribute");
      case Tok::kLBracket: {
        next();
        std::vector<int64_t> ints;
        std::vector<double> floats;
        bool any_float = false;
        if (!accept(Tok::kRBracket)) {
          do {
            const Token& e = peek();
            if (e.kind == Tok::kInt || e.kind == Tok::kIdent || e.kind == Tok::kQuestion) {
              const int64_t v = bound_size(parse_size(true), "an attribute");
              ints.push_back(v);
              floats.push_back(static_cast<double>(v));
            } else if (e.kind == Tok::kFloat) {
              any_float = true;
              floats.push_back(parse_float_text<double>(next()));
            } else {
              fail_at(e, "expected a number in a list attribute, found " + describe(e));
            }
          } while (accept(Tok::kComma));
          expect(Tok::kRBracket, "',' or ']'");
        }
        if (any_float) return floats;
        return ints;
      }
      default:
        break;
    }
    fail_at(t, "expected an attribute value (bool, number, string, list or dtype), found " +
                   describe(t));
  }

  Attrs parse_attrs() {
    Attrs attrs;
    if (!accept(Tok::kLBrace)) return attrs;
    do {
      const Token& key = expect(Tok::kIdent, "an attribute name");
      expect(Tok::kColon, "':'");
      if (attrs.count(key.text) != 0)
        fail_at(key, "attribute '" + std::string(key.text) + "' is given twice");
      attrs.emplace(std::string(key.text), parse_attr_value());
    } while (accept(Tok::kComma));
    expect(Tok::kRBrace, "',' or '}'");
    return attrs;
  }

  Value resolve(const Token& ref) {
    const std::string name(ref.text);
    if (auto it = values_.find(name); it != values_.end()) {
      const Value& v = it->second;
      if (v.node() != nullptr && v.node()->num_outputs() != 1) {
        fail_at(ref,
                detail::str_cat("expected an output index such as '", name, ".0' for a node with ",
                                v.node()->num_outputs(), " outputs, found '", name, "'"));
      }
      return v;
    }
    const size_t dot = name.rfind('.');
    if (dot != std::string::npos) {
      auto it = values_.find(name.substr(0, dot));
      if (it != values_.end() && it->second.node() != nullptr) {
        Node* node = it->second.node();
        const std::string_view digits = std::string_view(name).substr(dot + 1);
        size_t k = 0;
        auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
        if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() ||
            k >= node->num_outputs() || node->num_outputs() == 1) {
          fail_at(ref, detail::str_cat("expected an output index below ", node->num_outputs(),
                                       " of ", name.substr(0, dot), ", found '", name, "'"));
        }
        return Value(node, k);
      }
    }
    fail_at(ref, "expected a defined value, found '" + name + "' (not defined above)");
  }

  void define(const Token& at, Value value) {
    const std::string name(at.text);
    if (!values_.emplace(name, value).second) fail_at(at, "value '" + name + "' is defined twice");
  }

  void parse_parameters(Graph& graph) {
    expect(Tok::kLParen, "'(' to start the parameters");
    if (accept(Tok::kRParen)) return;
    do {
      const Token& ref = expect(Tok::kValueRef, "a parameter such as '%para1_x'");
      // %para<N>_<name>: the number only orders the dump; the name is what the graph keeps.
      std::string_view text = ref.text.substr(1);
      size_t i = 4;
      if (!text.starts_with("para"))
        fail_at(ref, "expected a parameter such as '%para1_x', found " + describe(ref));
      while (i < text.size() && is_digit(text[i])) ++i;
      if (i == 4 || i >= text.size() || text[i] != '_' || i + 1 >= text.size()) {
        fail_at(ref, "expected a parameter such as '%para1_x', found " + describe(ref));
      }
      std::string name(text.substr(i + 1));
      expect(Tok::kColon, "':'");
      ParsedType type = parse_type(true);
      if (graph.find_parameter(name) != nullptr)
        fail_at(ref, "parameter '" + name + "' is defined twice");
      if (type.symbolic) bind_parameter(graph, ref, name, type);
      if (graph.parent() == nullptr && !type.is_ref && binding_.signature != nullptr) {
        binding_.signature->push_back(
            {name, type.type.dtype,
             type.symbolic ? type.declared : symbolic_shape(type.type.shape)});
      }
      define(ref, graph.add_parameter(name, type.type, type.is_ref));
    } while (accept(Tok::kComma));
    expect(Tok::kRParen, "',' or ')'");
  }

  // A parameter with symbolic dimensions. In the entry graph it declares an input: its shape is
  // the one given for it (checked against the declaration, binding its symbols) or, when none is,
  // its symbols bound to 1. Elsewhere its sizes are evaluated with what the entry bound.
  void bind_parameter(const Graph& graph, const Token& at, const std::string& name,
                      ParsedType& type) {
    if (graph.parent() != nullptr) {
      for (size_t axis = 0; axis < type.declared.size(); ++axis) {
        if (type.unknown[axis]) {
          fail_at(type.at, "a subgraph parameter's dimension " + std::to_string(axis) +
                               " is not bound by an input of the entry graph");
        }
      }
      return;
    }
    for (size_t axis = 0; axis < type.declared.size(); ++axis) {
      if (type.declared[axis].size < 0 && type.declared[axis].symbol.empty() &&
          !type.unknown[axis]) {
        fail_at(type.at, "an input's dimension is a size, a symbol or '?', not a product");
      }
    }
    const InputSignature declared{name, type.type.dtype, type.declared};
    Shape shape;
    if (auto given = binding_.input_shapes.find(name); given != binding_.input_shapes.end()) {
      try {
        bind_input(declared, type.type.dtype, given->second, symbols_);
      } catch (const Error& e) {
        fail_at(at, e.message());
      }
      shape = given->second;
    } else {
      for (const SymbolicDim& dim : declared.shape) {
        if (!dim.known() && !dim.symbol.empty()) symbols_.emplace(dim.symbol, 1);
      }
      shape = concrete_shape(declared, symbols_, 1);
    }
    type.type.shape = shape;
  }

  // A declared type against the one the graph has: '?' dimensions match any size.
  static bool matches(const ParsedType& declared, const TensorType& actual) {
    if (!declared.symbolic) return declared.type == actual;
    if (declared.type.dtype != actual.dtype || declared.type.shape.size() != actual.shape.size()) {
      return false;
    }
    for (size_t axis = 0; axis < actual.shape.size(); ++axis) {
      if (!declared.unknown[axis] && declared.type.shape[axis] != actual.shape[axis]) return false;
    }
    return true;
  }
  // A declared type taken as it is (a constant's, a control-flow node's outputs): every size known.
  TensorType known_type(const ParsedType& declared, std::string_view where) {
    for (size_t axis = 0; axis < declared.unknown.size(); ++axis) {
      if (declared.unknown[axis]) {
        fail_at(declared.at, detail::str_cat("dimension ", axis, " of ", where,
                                             " is '?' or a symbol no input binds: give its size"));
      }
    }
    return declared.type;
  }

  std::vector<uint8_t> parse_constant_values(const TensorType& type) {
    std::vector<uint8_t> bytes;
    const Token& open = expect(Tok::kLBracket, "'[' to start the constant's values");
    const size_t expected = static_cast<size_t>(num_elements(type.shape));
    size_t count = 0;
    auto append = [&](auto v) {
      const size_t at = bytes.size();
      bytes.resize(at + sizeof(v));
      std::memcpy(bytes.data() + at, &v, sizeof(v));
    };
    if (!accept(Tok::kRBracket)) {
      do {
        const Token& e = peek();
        if (count >= expected) {
          fail_at(e, detail::str_cat("expected ", expected, " values for ", type_to_string(type),
                                     ", found more"));
        }
        switch (type.dtype) {
          case DType::kFloat32:
          case DType::kFloat64:
            if (e.kind != Tok::kInt && e.kind != Tok::kFloat) {
              fail_at(e, "expected a number, found " + describe(e));
            }
            if (type.dtype == DType::kFloat32) {
              append(parse_float_text<float>(next()));
            } else {
              append(parse_float_text<double>(next()));
            }
            break;
          case DType::kInt32:
          case DType::kInt64: {
            if (e.kind != Tok::kInt) fail_at(e, "expected an integer, found " + describe(e));
            const int64_t v = parse_int_token(next());
            if (type.dtype == DType::kInt32) {
              if (v < std::numeric_limits<int32_t>::min() ||
                  v > std::numeric_limits<int32_t>::max()) {
                fail_at(e, "expected an Int32 value, found " + describe(e));
              }
              append(static_cast<int32_t>(v));
            } else {
              append(v);
            }
            break;
          }
          case DType::kBool:
            if (e.kind != Tok::kIdent || (e.text != "true" && e.text != "false")) {
              fail_at(e, "expected 'true' or 'false', found " + describe(e));
            }
            append(static_cast<uint8_t>(next().text == "true" ? 1 : 0));
            break;
        }
        ++count;
      } while (accept(Tok::kComma));
      expect(Tok::kRBracket, "',' or ']'");
    }
    if (count != expected) {
      fail_at(open, detail::str_cat("expected ", expected, " values for ", type_to_string(type),
                                    ", found ", count));
    }
    return bytes;
  }

  // Scope and location lines directly after a node belong to it.
  NodeInfo parse_node_info() {
    NodeInfo info;
    while (tokens_[pos_].kind == Tok::kComment) {
      std::string_view text = tokens_[pos_].text;
      if (text.ends_with('\r')) text.remove_suffix(1);
      if (text.starts_with("# scope: ")) {
        info.scope = std::string(text.substr(9));
      } else if (text.starts_with("# location: ")) {
        info.location = std::string(text.substr(12));
      } else {
        break;
      }
      ++pos_;
    }
    return info;
  }

  void parse_node(Graph& graph, const Token& def) {
    const Token& op_token = expect(Tok::kIdent, "an op name or 'Constant'");
    if (op_token.text == "Constant") {
      ParsedType type = parse_type(false);
      const TensorType constant_type = known_type(type, "a constant's type");
      std::vector<uint8_t> bytes = parse_constant_values(constant_type);
      define(def, graph.add_constant(constant_type, std::move(bytes)));
      return;
    }
    const std::string op(op_token.text);
    const OpDef* op_def = find_op(op);
    if (op_def == nullptr) {
      try {
        get_op(op);
      } catch (const Error& e) {
        fail_at(op_token, e.message());
      }
    }
    expect(Tok::kLParen, "'(' after the op name");
    std::vector<Value> inputs;
    std::vector<Token> input_tokens;
    if (!accept(Tok::kRParen)) {
      do {
        const Token& ref = expect(Tok::kValueRef, "an operand such as '%3'");
        inputs.push_back(resolve(ref));
        input_tokens.push_back(ref);
      } while (accept(Tok::kComma));
      expect(Tok::kRParen, "',' or ')'");
    }
    Attrs attrs = parse_attrs();
    expect(Tok::kColon, "':' before the node's types");
    std::vector<ParsedType> declared_in = parse_type_list();
    expect(Tok::kArrow, "'->'");
    std::vector<ParsedType> declared_out = parse_type_list();
    NodeInfo info = parse_node_info();

    if (declared_in.size() != inputs.size()) {
      fail_at(declared_in.empty() ? op_token : declared_in.front().at,
              detail::str_cat("expected ", inputs.size(), " input types for op '", op, "', found ",
                              declared_in.size()));
    }
    std::vector<TensorType> input_types;
    for (size_t i = 0; i < inputs.size(); ++i) {
      input_types.push_back(inputs[i].type());
      if (!matches(declared_in[i], input_types.back())) {
        fail_at(declared_in[i].at,
                detail::str_cat("declared type ", type_to_string(declared_in[i].type), " of input ",
                                i, " does not match the type ", type_to_string(input_types.back()),
                                " of ", input_tokens[i].text));
      }
    }
    std::vector<TensorType> outputs;
    if (op_def->has(Trait::kControlFlow)) {
      // Output types come from subgraphs that may be defined further down: take the declared
      // ones; ir::verify checks them against the subgraphs.
      for (const ParsedType& t : declared_out) outputs.push_back(known_type(t, "an output type"));
      Node* node = graph.create_node(nullptr, op, std::move(inputs), std::move(attrs),
                                     std::move(outputs), std::move(info));
      define(def, Value(node, 0));
      return;
    }
    try {
      outputs = op_def->infer_types(input_types, attrs);
    } catch (const Error& e) {
      std::string message = e.message();
      for (const std::string& line : e.context()) message += "; " + line;
      fail_at(op_token, message);
    }
    if (outputs.size() != declared_out.size()) {
      fail_at(declared_out.empty() ? op_token : declared_out.front().at,
              detail::str_cat("op '", op, "' infers ", outputs.size(), " outputs, but ",
                              declared_out.size(), " are declared"));
    }
    for (size_t k = 0; k < outputs.size(); ++k) {
      if (!matches(declared_out[k], outputs[k])) {
        fail_at(declared_out[k].at,
                detail::str_cat("declared output type ", type_to_string(declared_out[k].type),
                                " of op '", op, "' does not match the inferred ",
                                type_to_string(outputs[k])));
      }
    }
    Node* node = graph.create_node(nullptr, op, std::move(inputs), std::move(attrs),
                                   std::move(outputs), std::move(info));
    define(def, Value(node, 0));
  }

  void parse_block(Graph& graph) {
    // A fresh map, not clear(): clear() keeps (and zeroes) the bucket array of the largest block
    // so far, so many small blocks after a large one cost O(blocks x largest block).
    values_ = {};
    parse_parameters(graph);
    expect(Tok::kLBrace, "'{' to start the graph body");
    for (;;) {
      const Token& t = peek();
      if (t.kind == Tok::kIdent && t.text == "Return") {
        next();
        expect(Tok::kLParen, "'(' after Return");
        if (!accept(Tok::kRParen)) {
          do {
            const Value output = resolve(expect(Tok::kValueRef, "an output such as '%3'"));
            std::string name;
            if (peek().kind == Tok::kIdent && peek().text == "as") {
              next();
              name = decode_string(expect(Tok::kString, "a quoted output name after 'as'"));
            }
            graph.add_output(output, std::move(name));
          } while (accept(Tok::kComma));
          expect(Tok::kRParen, "',' or ')'");
        }
        expect(Tok::kRBrace, "'}' after Return");
        return;
      }
      const Token& def = expect(Tok::kValueRef, "a definition such as '%0 = ...' or 'Return'");
      if (values_.count(std::string(def.text)) != 0) {
        fail_at(def, "value '" + std::string(def.text) + "' is defined twice");
      }
      expect(Tok::kEquals, "'='");
      parse_node(graph, def);
    }
  }

  std::vector<Token> tokens_;
  std::string_view file_;
  const ParseBinding& binding_;
  SymbolValues symbols_;  // bound by the entry graph's parameters, in order
  size_t pos_ = 0;
  std::unordered_map<std::string, Value> values_;
};

}  // namespace

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename) {
  return parse_graph(text, filename, ParseBinding{});
}

std::unique_ptr<Graph> parse_graph(std::string_view text, std::string_view filename,
                                   const ParseBinding& binding) {
  std::vector<Token> tokens = Lexer(text, filename).run();
  return Parser(std::move(tokens), filename, binding).parse_module();
}

std::unique_ptr<Graph> parse_graph_file(const std::string& path) {
  // Only a regular file, at most 256 MiB, opened without blocking (a FIFO is an error, not a hang).
  const std::string text = read_regular_file(path, kMaxTextFileBytes, "IR file");
  return parse_graph(text, path);
}

}  // namespace mf::ir
