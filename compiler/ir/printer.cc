#include "compiler/ir/printer.h"

#include <sstream>

#include <fmt/format.h>

namespace tunefarm::ir {
namespace {

std::string type_suffix(const Type& t) { return t.lanes > 1 ? fmt::format("x{}", t.lanes) : ""; }

const char* binary_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return " + ";
    case BinaryOp::kSub: return " - ";
    case BinaryOp::kMul: return "*";
    case BinaryOp::kDiv: return "/";
    case BinaryOp::kMod: return " % ";
    default: return nullptr;
  }
}

const char* compare_symbol(CompareOp op) {
  switch (op) {
    case CompareOp::kEQ: return " == ";
    case CompareOp::kNE: return " != ";
    case CompareOp::kLT: return " < ";
    case CompareOp::kLE: return " <= ";
    case CompareOp::kGT: return " > ";
    case CompareOp::kGE: return " >= ";
  }
  return "?";
}

std::string type_name(const Type& t) {
  std::string base = t.is_float() ? (t.bits == 64 ? "float64" : "float32") : t.is_bool() ? "bool" : "int64";
  return base + type_suffix(t);
}

std::string indices_to_string(const std::vector<Expr>& idx) {
  std::string out;
  for (size_t i = 0; i < idx.size(); ++i) out += (i ? ", " : "") + to_string(idx[i]);
  return out;
}

class Printer {
 public:
  void print(const Stmt& s, int indent) {
    std::string pad(indent * 2, ' ');
    if (!s) return;
    switch (s->kind) {
      case StmtKind::kFor: {
        auto* op = s->as<For>();
        out_ << pad << "for (" << op->var->name << ", " << to_string(op->min) << ", " << to_string(op->extent) << ")";
        if (op->for_kind != ForKind::kSerial) out_ << " " << for_kind_name(op->for_kind);
        if (!op->thread_tag.empty()) out_ << " " << op->thread_tag;
        out_ << " {\n";
        print(op->body, indent + 1);
        out_ << pad << "}\n";
        return;
      }
      case StmtKind::kLet: {
        auto* op = s->as<LetStmt>();
        out_ << pad << "let " << op->var->name << " = " << to_string(op->value) << "\n";
        print(op->body, indent);
        return;
      }
      case StmtKind::kStore: {
        auto* op = s->as<Store>();
        out_ << pad << op->buffer->name << "[" << indices_to_string(op->indices) << "] = " << to_string(op->value);
        if (op->predicate) out_ << " if " << to_string(op->predicate);
        out_ << "\n";
        return;
      }
      case StmtKind::kAllocate: {
        auto* op = s->as<Allocate>();
        out_ << pad << "allocate " << op->buffer->name << "[" << type_name(op->buffer->dtype);
        for (int64_t d : op->buffer->shape) out_ << " * " << d;
        out_ << "] in " << scope_name(op->buffer->scope) << "\n";
        print(op->body, indent);
        return;
      }
      case StmtKind::kIf: {
        auto* op = s->as<IfThenElse>();
        out_ << pad << "if (" << to_string(op->cond) << ") {\n";
        print(op->then_case, indent + 1);
        if (op->else_case) {
          out_ << pad << "} else {\n";
          print(op->else_case, indent + 1);
        }
        out_ << pad << "}\n";
        return;
      }
      case StmtKind::kBlock:
        for (const auto& st : s->as<Block>()->stmts) print(st, indent);
        return;
      case StmtKind::kEvaluate:
        out_ << pad << to_string(s->as<Evaluate>()->value) << "\n";
        return;
    }
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace

std::string to_string(const Expr& e) {
  if (!e) return "<null>";
  switch (e->kind) {
    case ExprKind::kIntImm: {
      auto* op = e->as<IntImm>();
      if (op->type.is_bool()) return op->value ? "true" : "false";
      return std::to_string(op->value);
    }
    case ExprKind::kFloatImm: return fmt::format("{}{}", e->as<FloatImm>()->value, e->type.bits == 64 ? "" : "f");
    case ExprKind::kVar: return e->as<VarNode>()->name;
    case ExprKind::kBinary: {
      auto* op = e->as<Binary>();
      if (const char* sym = binary_symbol(op->op)) return "(" + to_string(op->a) + sym + to_string(op->b) + ")";
      return fmt::format("{}({}, {})", op->op == BinaryOp::kMin ? "min" : "max", to_string(op->a), to_string(op->b));
    }
    case ExprKind::kCompare: {
      auto* op = e->as<Compare>();
      return "(" + to_string(op->a) + compare_symbol(op->op) + to_string(op->b) + ")";
    }
    case ExprKind::kLogical: {
      auto* op = e->as<Logical>();
      return "(" + to_string(op->a) + (op->op == LogicalOp::kAnd ? " && " : " || ") + to_string(op->b) + ")";
    }
    case ExprKind::kNot: return "!" + to_string(e->as<Not>()->a);
    case ExprKind::kSelect: {
      auto* op = e->as<Select>();
      return fmt::format("select({}, {}, {})", to_string(op->cond), to_string(op->t), to_string(op->f));
    }
    case ExprKind::kCast: return fmt::format("{}({})", type_name(e->type), to_string(e->as<Cast>()->value));
    case ExprKind::kLoad: {
      auto* op = e->as<Load>();
      std::string text = op->buffer->name + "[" + indices_to_string(op->indices) + "]";
      return op->predicate ? "(" + text + " if " + to_string(op->predicate) + ")" : text;
    }
    case ExprKind::kBroadcast: {
      auto* op = e->as<Broadcast>();
      return fmt::format("x{}({})", op->lanes, to_string(op->value));
    }
    case ExprKind::kRamp: {
      auto* op = e->as<Ramp>();
      return fmt::format("ramp({}, {}, {})", to_string(op->base), to_string(op->stride), op->lanes);
    }
    case ExprKind::kCall: {
      auto* op = e->as<Call>();
      return op->name + "(" + indices_to_string(op->args) + ")";
    }
    case ExprKind::kReduce: {
      auto* op = e->as<Reduce>();
      std::string axes;
      for (size_t i = 0; i < op->axes.size(); ++i) axes += fmt::format("{}{}:{}", i ? ", " : "", op->axes[i]->name, op->extents[i]);
      return fmt::format("{}({}, axes=[{}])", op->op == ReduceOp::kSum ? "sum" : "max", to_string(op->source), axes);
    }
  }
  return "?";
}

std::string to_string(const Stmt& s) {
  Printer p;
  p.print(s, 0);
  return p.str();
}

std::string to_string(const LoweredFunc& f) {
  std::string head = f.name + "(";
  for (size_t i = 0; i < f.args.size(); ++i) {
    head += (i ? ", " : "") + f.args[i]->name + "[";
    for (size_t d = 0; d < f.args[i]->shape.size(); ++d) head += (d ? ", " : "") + std::to_string(f.args[i]->shape[d]);
    head += "]";
  }
  Printer p;
  p.print(f.body, 1);
  return head + ") {\n" + p.str() + "}\n";
}

}  // namespace tunefarm::ir
