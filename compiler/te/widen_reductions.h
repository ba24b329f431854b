// The reference kernel's precision: the same compute definition with every sum accumulated in a
// wider type. A float sum of K terms taken in order drifts by about sqrt(K) ulps; a reference that
// drifts as much as the candidates it checks would make the check measure its own error.
#pragma once

#include <vector>

#include "compiler/te/tensor.h"

namespace tunefarm::te {

// Rebuilds the operations behind `args` (inputs, then the output) so that each sum reduction
// accumulates in `acc` (its operands converted before they are multiplied and added), stages that
// read an accumulator read it converted back to its old type, and an output that was itself a sum
// gets a final conversion stage of its old name. Placeholders are kept, so the inputs stay the same
// tensors; the returned arguments are in the same order.
std::vector<Tensor> widen_reductions(const std::vector<Tensor>& args, ir::Type acc);

}  // namespace tunefarm::te
