// Runs a unary elementwise step before the Reshape it reads when that Reshape's input is a 4-D
// map: decompose writes a 1-D convolution (wav2vec 2.0's and Whisper's audio front ends) as a 2-D
// one over one row whose [N, C, 1, L] output is Reshaped back to [N, C, L]; the GELU after it read
// that 3-D view, which only NCHW serves, so every such GELU converted the convolution's channel
// blocks to NCHW and back (2.4 ms of a 38 ms wav2vec 2.0). Computed on the 4-D map it runs in the
// blocks, and the Reshape back and the next convolution's Reshape to one row are views of it.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Moves every unary elementwise node that reads the only use of a Reshape of a 4-D value above
// that Reshape; answers how many it moved.
StatusOr<int> unary_before_views(Graph& graph);

}  // namespace tunefarm::model
