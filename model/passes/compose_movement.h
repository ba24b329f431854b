// Composes chains of data movement into one step each, so that a built model copies a tensor once
// where the exporter moved it several times (attention's heads: timm's ViT writes q, k and v as
// Reshape -> Transpose -> Gather(0|1|2), then Transpose(k) for the scores; each was a step that
// copied the whole tensor):
//   Gather(Transpose(x, perm), i, axis a), i a constant scalar  becomes  one "Transpose" of x that
//     reads x's axis perm[a] at i: attributes "select_axis" (an axis of x) and "select_index",
//     and a perm over x's other axes;
//   Transpose(Transpose(x, p1), p2)  becomes  Transpose(x, p1 composed with p2), the inner one's
//     selected axis kept, where the composed copy still reads x's last axis innermost (a copy
//     that gathers each vector from rows far apart costs more than the copy it saves).
//   Reshape(Transpose(x [N, L, C], [0, 2, 1]), [N, C, H, W])  and
//   Transpose(Reshape(y [N, C, H, W], [N, C, L]), [0, 2, 1])  (tokens to a map and back, L = H x W:
//     SegFormer, PVT)  become a 4-D Transpose between the map and its channels-last view
//     [N, H, W, C] (a Reshape of the tokens), which moves whole vectors of channels to and from
//     a convolution's channel blocks instead of gathering each vector from rows L apart.
// A Transpose or Reshape that nothing reads any more (nor the graph's outputs) is dropped. First, nodes that
// copy their input unchanged (Identity, Dropout, a Cast of float32 to float32, an Expand to the
// input's own shape) are dropped, their readers reading the input: the patterns after this pass
// (RMSNorm, GELU) then see the chain the exporter meant.
#pragma once

#include "common/status.h"
#include "model/graph.h"

namespace tunefarm::model {

// Answers how many nodes now read the origin of their data directly.
StatusOr<int> compose_movement(Graph& graph);

}  // namespace tunefarm::model
