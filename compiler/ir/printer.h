// Human-readable text for IR, so that every test and debugging session can show the IR it got.
#pragma once

#include <string>

#include "compiler/ir/ir.h"

namespace tunefarm::ir {

std::string to_string(const Expr& e);
std::string to_string(const Stmt& s);
std::string to_string(const LoweredFunc& f);

}  // namespace tunefarm::ir
