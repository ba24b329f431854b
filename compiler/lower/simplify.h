// Simplification: constant folding and a canonical linear form for integer index arithmetic,
// using what is known about the ranges of loop variables. It is what turns the index expressions
// that splits and packed layouts produce, e.g. ((jo*32 + ji)/32) with ji in [0, 32), back into `jo`,
// and what proves tail-loop extents constant once a loop has been partitioned.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>

#include "compiler/ir/ir.h"

namespace tunefarm::lower {

struct ConstRange {
  int64_t lo, hi;  // Inclusive.
};
using RangeMap = std::unordered_map<const ir::VarNode*, ConstRange>;

ir::Expr simplify(const ir::Expr& e, const RangeMap& ranges = {});
// Loop variables' ranges come from the loops themselves.
ir::Stmt simplify(const ir::Stmt& s, const RangeMap& ranges = {});

// a / b rounded towards negative infinity (C++ division truncates towards zero).
int64_t floor_divide(int64_t a, int64_t b);

// Constant lower and upper bounds of an integer expression, if they can be derived.
std::optional<ConstRange> const_bounds(const ir::Expr& e, const RangeMap& ranges);

// If `e` is coeff*v + constant (after simplification), returns {coeff, constant}.
std::optional<std::pair<int64_t, int64_t>> as_linear_in(const ir::Expr& e, const ir::VarNode* v);

}  // namespace tunefarm::lower
