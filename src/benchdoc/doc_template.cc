// benchdoc/doc_template.cc: holes in document text, filled from measured facts (doc_template.h).
#include "benchdoc/doc_template.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "report/markdown.h"

namespace bakeoff::benchdoc {

using report::WithThousands;
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// --- Syntax --------------------------------------------------------------------------------------

struct Node {
  enum class Kind { kNumber, kString, kFact, kNot, kNegate, kBinary, kTernary, kCall };
  Kind kind = Kind::kNumber;
  double number = 0;
  std::string text;  // the string, fact name, function name or binary operator
  std::vector<std::unique_ptr<Node>> args;
};
using NodePtr = std::unique_ptr<Node>;

NodePtr Make(Node::Kind kind, std::string text = {}) {
  auto node = std::make_unique<Node>();
  node->kind = kind;
  node->text = std::move(text);
  return node;
}

bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) {
  return IsNameStart(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '.';
}

// Recursive descent; the first error is kept and every rule returns null after it.
class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Result<NodePtr> ParseWhole() {
    NodePtr node = Ternary();
    Skip();
    if (node && pos_ != text_.size()) Fail(fmt::format("unexpected '{}'", text_.substr(pos_, 1)));
    if (!error_.empty()) return Error{ErrorCode::kInvalidInput, error_};
    return node;
  }

 private:
  void Fail(std::string message) {
    if (error_.empty()) error_ = fmt::format("column {}: {}", pos_ + 1, message);
  }
  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Eat(std::string_view token) {
    Skip();
    if (text_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  NodePtr Binary(std::string op, NodePtr left, NodePtr right) {
    if (!left || !right) return nullptr;
    NodePtr node = Make(Node::Kind::kBinary, std::move(op));
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    return node;
  }

  NodePtr Ternary() {
    if (depth_ > 64) {  // every nesting ('(', a call, a branch of ?:) comes through here or Unary
      Fail("expression nested too deeply");
      return nullptr;
    }
    ++depth_;
    NodePtr node = TernaryBody();
    --depth_;
    return node;
  }
  NodePtr TernaryBody() {
    NodePtr cond = Or();
    if (!cond || !Eat("?")) return cond;
    NodePtr yes = Ternary();
    if (yes && !Eat(":")) Fail("expected ':' of '? :'");
    NodePtr no = yes ? Ternary() : nullptr;
    if (!yes || !no) return nullptr;
    NodePtr node = Make(Node::Kind::kTernary);
    node->args.push_back(std::move(cond));
    node->args.push_back(std::move(yes));
    node->args.push_back(std::move(no));
    return node;
  }
  NodePtr Or() {
    NodePtr left = And();
    while (left && Eat("||")) left = Binary("||", std::move(left), And());
    return left;
  }
  NodePtr And() {
    NodePtr left = Compare();
    while (left && Eat("&&")) left = Binary("&&", std::move(left), Compare());
    return left;
  }
  NodePtr Compare() {
    NodePtr left = Sum();
    for (std::string_view op : {"<=", ">=", "==", "!=", "<", ">"}) {
      if (left && Eat(op)) return Binary(std::string(op), std::move(left), Sum());
    }
    return left;
  }
  NodePtr Sum() {
    NodePtr left = Product();
    while (left) {
      if (Eat("+"))
        left = Binary("+", std::move(left), Product());
      else if (Eat("-"))
        left = Binary("-", std::move(left), Product());
      else
        break;
    }
    return left;
  }
  NodePtr Product() {
    NodePtr left = Unary();
    while (left) {
      if (Eat("*"))
        left = Binary("*", std::move(left), Unary());
      else if (Eat("/"))
        left = Binary("/", std::move(left), Unary());
      else
        break;
    }
    return left;
  }
  NodePtr Unary() {
    if (++depth_ > 64) {
      Fail("expression nested too deeply");
      return nullptr;
    }
    NodePtr node;
    if (Eat("-") || Eat("!")) {
      bool negate = text_[pos_ - 1] == '-';
      NodePtr operand = Unary();
      if (operand) {
        node = Make(negate ? Node::Kind::kNegate : Node::Kind::kNot);
        node->args.push_back(std::move(operand));
      }
    } else {
      node = Primary();
    }
    --depth_;
    return node;
  }
  NodePtr Primary() {
    Skip();
    if (pos_ == text_.size()) {
      Fail("expected a value");
      return nullptr;
    }
    char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      NodePtr inner = Ternary();
      if (inner && !Eat(")")) Fail("expected ')'");
      return error_.empty() ? std::move(inner) : nullptr;
    }
    if (c == '\'' || c == '"') {
      size_t end = text_.find(c, pos_ + 1);
      if (end == std::string_view::npos) {
        Fail("unterminated string");
        return nullptr;
      }
      NodePtr node = Make(Node::Kind::kString, std::string(text_.substr(pos_ + 1, end - pos_ - 1)));
      pos_ = end + 1;
      return node;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      double value = 0;
      auto [end, ec] = std::from_chars(text_.data() + pos_, text_.data() + text_.size(), value);
      if (ec != std::errc()) {
        Fail("not a number");
        return nullptr;
      }
      NodePtr node = Make(Node::Kind::kNumber);
      node->number = value;
      pos_ = static_cast<size_t>(end - text_.data());
      return node;
    }
    if (!IsNameStart(c)) {
      Fail(fmt::format("unexpected '{}'", c));
      return nullptr;
    }
    size_t start = pos_;
    while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
    std::string name(text_.substr(start, pos_ - start));
    if (!Eat("(")) return Make(Node::Kind::kFact, std::move(name));
    NodePtr call = Make(Node::Kind::kCall, std::move(name));
    if (!Eat(")")) {
      do {
        NodePtr arg = Ternary();
        if (!arg) return nullptr;
        call->args.push_back(std::move(arg));
      } while (Eat(","));
      if (!Eat(")")) {
        Fail("expected ')' or ','");
        return nullptr;
      }
    }
    return call;
  }

  std::string_view text_;
  size_t pos_ = 0;
  int depth_ = 0;
  std::string error_;
};

// --- Values --------------------------------------------------------------------------------------

std::string PlainNumber(double x) {
  if (!std::isfinite(x)) return "n/a";
  if (x == std::floor(x) && std::fabs(x) < 1e15) return fmt::format("{:.0f}", x);
  return fmt::format("{}", x);
}

}  // namespace

std::string FactText(const FactItem& item) {
  if (const auto* text = std::get_if<std::string>(&item)) return *text;
  return PlainNumber(std::get<double>(item));
}

namespace {

Result<std::string> FormatItem(const FactItem& item, std::string_view format) {
  const auto* number = std::get_if<double>(&item);
  if (format.empty() || !number) {
    if (format.empty() || format == "int" || format == "g" || format.front() == '.')
      return FactText(item);
  } else if (!std::isfinite(*number)) {
    return std::string("n/a");
  } else if (format == "int") {
    return WithThousands(*number);
  } else if (format == "g") {
    return fmt::format("{:.6g}", *number);
  } else if (format.size() == 2 && format[0] == '.' &&
             std::isdigit(static_cast<unsigned char>(format[1]))) {
    return fmt::format("{:.{}f}", *number, format[1] - '0');
  }
  return Error{ErrorCode::kInvalidInput,
               fmt::format("unknown format '{}' (int, g, .0 to .9)", format)};
}

// The ':' that starts a hole's format: the last one outside strings and parentheses that does not
// close a `? :`; npos when there is none.
size_t FormatColon(std::string_view hole) {
  size_t found = std::string_view::npos;
  int depth = 0;
  int open_questions = 0;
  char quote = 0;
  for (size_t i = 0; i < hole.size(); ++i) {
    const char c = hole[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (depth == 0 && c == '?') {
      ++open_questions;
    } else if (depth == 0 && c == ':') {
      if (open_questions > 0)
        --open_questions;
      else
        found = i;
    }
  }
  return found;
}

bool IsFormat(std::string_view text) {
  return text == "int" || text == "g" ||
         (text.size() == 2 && text[0] == '.' && std::isdigit(static_cast<unsigned char>(text[1])));
}

Result<std::vector<double>> Numbers(const FactValue& value, std::string_view what) {
  std::vector<double> numbers;
  numbers.reserve(value.size());
  for (const FactItem& item : value) {
    const auto* number = std::get_if<double>(&item);
    if (!number)
      return Error{ErrorCode::kInvalidInput,
                   fmt::format("{} of a string ('{}')", what, FactText(item))};
    numbers.push_back(*number);
  }
  return numbers;
}

FactValue Of(double x) { return FactValue{x}; }
FactValue Of(std::string text) { return FactValue{std::move(text)}; }

class Evaluator {
 public:
  explicit Evaluator(const Facts& facts) : facts_(facts) {}

  Result<FactValue> Eval(const Node& node) {
    switch (node.kind) {
      case Node::Kind::kNumber:
        return Of(node.number);
      case Node::Kind::kString:
        return Of(node.text);
      case Node::Kind::kFact: {
        auto found = facts_.find(node.text);
        if (found == facts_.end())
          return Error{ErrorCode::kInvalidInput, fmt::format("no fact '{}'", node.text)};
        return found->second;
      }
      case Node::Kind::kNot: {
        Result<FactValue> operand = Eval(*node.args[0]);
        if (!operand) return operand;
        return Of(IsTrue(*operand) ? 0.0 : 1.0);
      }
      case Node::Kind::kNegate:
        return Arithmetic("*", Of(-1.0), node.args[0]);
      case Node::Kind::kTernary: {
        Result<FactValue> cond = Eval(*node.args[0]);
        if (!cond) return cond;
        return Eval(*node.args[IsTrue(*cond) ? 1 : 2]);
      }
      case Node::Kind::kBinary: {
        if (node.text == "&&" || node.text == "||") {
          Result<FactValue> left = Eval(*node.args[0]);
          if (!left) return left;
          bool decided = node.text == "&&" ? !IsTrue(*left) : IsTrue(*left);
          if (decided) return Of(IsTrue(*left) ? 1.0 : 0.0);
          Result<FactValue> right = Eval(*node.args[1]);
          if (!right) return right;
          return Of(IsTrue(*right) ? 1.0 : 0.0);
        }
        Result<FactValue> left = Eval(*node.args[0]);
        if (!left) return left;
        return Arithmetic(node.text, *left, node.args[1]);
      }
      case Node::Kind::kCall:
        return Call(node);
    }
    return Error{ErrorCode::kInternal, "unknown expression node"};
  }

 private:
  // LEFT OP RIGHT, element by element.
  Result<FactValue> Arithmetic(const std::string& op, const FactValue& left,
                               const NodePtr& right_node) {
    Result<FactValue> right = Eval(*right_node);
    if (!right) return right;
    // A list of one value broadcasts against the other side, whatever its length (none included).
    const size_t n = left.size() == 1 ? right->size() : left.size();
    if (left.size() != right->size() && left.size() != 1 && right->size() != 1) {
      return Error{ErrorCode::kInvalidInput, fmt::format("'{}' on lists of {} and {} values", op,
                                                         left.size(), right->size())};
    }
    FactValue out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const FactItem& a = left[left.size() == 1 ? 0 : i];
      const FactItem& b = (*right)[right->size() == 1 ? 0 : i];
      const auto* x = std::get_if<double>(&a);
      const auto* y = std::get_if<double>(&b);
      if (!x || !y) {
        if (op == "+")
          out.emplace_back(FactText(a) + FactText(b));
        else if (op == "==" || op == "!=")
          out.emplace_back((FactText(a) == FactText(b)) == (op == "==") ? 1.0 : 0.0);
        else
          return Error{ErrorCode::kInvalidInput,
                       fmt::format("'{}' on a string ('{}')", op, FactText(x ? b : a))};
        continue;
      }
      double v = 0;
      if (op == "+")
        v = *x + *y;
      else if (op == "-")
        v = *x - *y;
      else if (op == "*")
        v = *x * *y;
      else if (op == "/")
        v = *y == 0 ? kNaN : *x / *y;
      else if (op == "<")
        v = *x < *y;
      else if (op == "<=")
        v = *x <= *y;
      else if (op == ">")
        v = *x > *y;
      else if (op == ">=")
        v = *x >= *y;
      else if (op == "==")
        v = *x == *y;
      else
        v = *x != *y;
      out.emplace_back(v);
    }
    return out;
  }

  Result<FactValue> Call(const Node& node) {
    const std::string& name = node.text;
    auto arity = [&](size_t n) -> Status {
      if (node.args.size() == n) return Ok{};
      return Error{ErrorCode::kInvalidInput,
                   fmt::format("{}() takes {} argument{}", name, n, n == 1 ? "" : "s")};
    };
    if (name == "has") {
      if (Status s = arity(1); !s) return s.error();
      if (node.args[0]->kind != Node::Kind::kFact)
        return Error{ErrorCode::kInvalidInput, "has() takes a fact name"};
      return Of(facts_.contains(node.args[0]->text) ? 1.0 : 0.0);
    }
    if (name == "join" || name == "fmt") {
      if (Status s = arity(2); !s) return s.error();
      Result<FactValue> list = Eval(*node.args[0]);
      if (!list) return list;
      Result<FactValue> second = Eval(*node.args[1]);
      if (!second) return second;
      if (second->size() != 1 || !std::holds_alternative<std::string>(second->front())) {
        return Error{ErrorCode::kInvalidInput,
                     fmt::format("{}()'s second argument is one string", name)};
      }
      const std::string& text = std::get<std::string>(second->front());
      FactValue out;
      std::string joined;
      for (size_t i = 0; i < list->size(); ++i) {
        if (name == "join") {
          joined += (i ? text : "") + FactText((*list)[i]);
          continue;
        }
        Result<std::string> item = FormatItem((*list)[i], text);
        if (!item) return item.error();
        out.emplace_back(std::move(*item));
      }
      if (name == "join") return Of(std::move(joined));
      return out;
    }
    if (Status s = arity(1); !s) return s.error();
    Result<FactValue> arg = Eval(*node.args[0]);
    if (!arg) return arg;
    if (name == "count") return Of(static_cast<double>(arg->size()));
    if (name == "first" || name == "last") {
      if (arg->empty()) return Error{ErrorCode::kInvalidInput, name + "() of no values"};
      return FactValue{name == "first" ? arg->front() : arg->back()};
    }
    Result<std::vector<double>> numbers = Numbers(*arg, name + "()");
    if (!numbers) return numbers.error();
    std::vector<double>& v = *numbers;
    if (name == "floor" || name == "ceil" || name == "round" || name == "abs") {
      FactValue out;
      for (double x : v) {
        out.emplace_back(name == "floor"   ? std::floor(x)
                         : name == "ceil"  ? std::ceil(x)
                         : name == "round" ? std::round(x)
                                           : std::fabs(x));
      }
      return out;
    }
    if (name != "median" && name != "min" && name != "max" && name != "sum" && name != "mean") {
      return Error{ErrorCode::kInvalidInput, fmt::format("unknown function '{}'", name)};
    }
    if (v.empty()) return Error{ErrorCode::kInvalidInput, name + "() of no values"};
    std::sort(v.begin(), v.end());
    double total = std::accumulate(v.begin(), v.end(), 0.0);
    if (name == "min") return Of(v.front());
    if (name == "max") return Of(v.back());
    if (name == "sum") return Of(total);
    if (name == "mean") return Of(total / static_cast<double>(v.size()));
    size_t mid = v.size() / 2;
    return Of(v.size() % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2);
  }

  const Facts& facts_;
};

}  // namespace

bool IsTrue(const FactValue& value) {
  if (value.empty()) return false;
  return std::all_of(value.begin(), value.end(), [](const FactItem& item) {
    if (const auto* number = std::get_if<double>(&item))
      return *number != 0 && !std::isnan(*number);
    return !std::get<std::string>(item).empty();
  });
}

Result<FactValue> EvaluateExpression(std::string_view expression, const Facts& facts) {
  Result<NodePtr> tree = Parser(expression).ParseWhole();
  if (!tree) return tree.error();
  return Evaluator(facts).Eval(**tree);
}

Result<std::string> FormatFact(const FactValue& value, std::string_view format) {
  std::string out;
  for (size_t i = 0; i < value.size(); ++i) {
    Result<std::string> item = FormatItem(value[i], format);
    if (!item) return item;
    out += (i ? " " : "") + *item;
  }
  return out;
}

Result<std::string> RenderTemplate(std::string_view text, const Facts& facts) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}')
      return Error{ErrorCode::kInvalidInput,
                   fmt::format("a lone '}}' at offset {} (write }}}})", i)};
    if (c != '{') {
      out += c;
      continue;
    }
    // The hole runs to the first '}' outside a string.
    size_t end = i + 1;
    char quote = 0;
    for (; end < text.size(); ++end) {
      if (quote) {
        if (text[end] == quote) quote = 0;
      } else if (text[end] == '\'' || text[end] == '"') {
        quote = text[end];
      } else if (text[end] == '}') {
        break;
      }
    }
    if (end == text.size())
      return Error{ErrorCode::kInvalidInput, fmt::format("an unclosed '{{' at offset {}", i)};
    std::string_view hole = text.substr(i + 1, end - i - 1);
    std::string_view expression = hole;
    std::string_view format;
    if (size_t colon = FormatColon(hole); colon != std::string_view::npos) {
      std::string_view tail = hole.substr(colon + 1);
      while (!tail.empty() && tail.front() == ' ') tail.remove_prefix(1);
      while (!tail.empty() && tail.back() == ' ') tail.remove_suffix(1);
      if (IsFormat(tail)) {
        expression = hole.substr(0, colon);
        format = tail;
      }
    }
    Result<FactValue> value = EvaluateExpression(expression, facts);
    Result<std::string> shown =
        value ? FormatFact(*value, format) : Result<std::string>(value.error());
    if (!shown)
      return Error{ErrorCode::kInvalidInput,
                   fmt::format("{{{}}}: {}", hole, shown.error().message)};
    out += *shown;
    i = end;
  }
  return out;
}

}  // namespace bakeoff::benchdoc
