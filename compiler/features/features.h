// Loop-IR features for the cost model: a fixed-length vector per candidate, read from the
// annotated loop nest (before tail handling, unrolling and vectorization consume the
// annotations), in the spirit of AutoTVM's "itervar" features. Values are log-scaled so that a
// model trained on one workload transfers to others.
//
// Layout (kFeatureLength floats):
//   [0, 48)   the 8 innermost loops around the heaviest store (innermost last, zero-padded):
//             log2(1+extent), parallel, vectorized, unrolled, GPU-bound, reduction (the loop
//             variable does not index the stored element);
//   [48, 64)  up to 4 buffers of that store (the output, then loads by frequency):
//             log2(1+|stride| of the innermost loop), log2(1+elements touched),
//             log2(1+reuse = iterations per element touched), innermost-stride-is-1;
//   [64, 72)  log2(1+float operations), log2(1+iterations of the store), log2(1+loads per
//             iteration), log2(1+number of loops), nesting depth, log2(1+local bytes),
//             log2(1+workspace bytes), log2(1+vector lanes of the innermost vectorized loop).
#pragma once

#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace tunefarm::features {

inline constexpr int kFeatureLength = 72;

std::vector<float> extract_features(const ir::LoopNest& loops);

// Names of the features, in order (for dumps and model inspection).
std::vector<std::string> feature_names();

}  // namespace tunefarm::features
