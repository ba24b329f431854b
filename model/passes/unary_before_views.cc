#include "model/passes/unary_before_views.h"

#include <algorithm>
#include <string>
#include <utility>

#include "model/operators.h"

namespace tunefarm::model {
namespace {

// A step that computes each element from that element alone and runs in channel blocks: moved
// above the Reshape, it reads the convolution's blocks.
bool unary_elementwise(const Node& node) {
  return is_blockable_elementwise(node.op) && node.inputs.size() == 1 && node.outputs.size() == 1 &&
         node.epilogue.empty();
}

}  // namespace

StatusOr<int> unary_before_views(Graph& graph) {
  int moved = 0;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!unary_elementwise(graph.nodes[i])) continue;
    const std::string in = graph.nodes[i].inputs[0];
    int r = graph.producer(in);
    if (r < 0 || graph.nodes[r].op != "Reshape" || graph.nodes[r].outputs.size() != 1 || graph.readers(in) != 1 ||
        graph.nodes[r].inputs.empty())
      continue;
    const Value* map = graph.find(graph.nodes[r].inputs[0]);
    const Value* out = graph.find(graph.nodes[i].outputs[0]);
    if (!map || map->constant || map->shape.size() != 4 || !out) continue;
    // op(Reshape(x)) -> Reshape(op(x)): the op writes a new value of x's shape, the Reshape the
    // op's old output; the op then sits where the Reshape was (before every reader of its output).
    Node op = graph.nodes[i];
    Node reshape = graph.nodes[static_cast<size_t>(r)];
    std::string mapped = op.name + "/map";
    Value v = *map;
    v.name = mapped;
    v.constant = false;
    v.floats.clear();
    v.ints.clear();
    graph.values[mapped] = std::move(v);
    op.inputs[0] = reshape.inputs[0];
    reshape.inputs[0] = mapped;
    reshape.outputs[0] = op.outputs[0];
    op.outputs[0] = mapped;
    graph.values.erase(in);
    graph.nodes[static_cast<size_t>(r)] = std::move(op);
    graph.nodes[i] = std::move(reshape);
    ++moved;
    // The Reshape back from the map read only by the next convolution's Reshape to its map: both
    // go, and that convolution reads the map itself.
    const std::string flat = graph.nodes[i].outputs[0];
    int next = graph.only_reader(flat);
    if (next < 0 || graph.nodes[static_cast<size_t>(next)].op != "Reshape" || graph.nodes[static_cast<size_t>(next)].inputs[0] != flat)
      continue;
    const std::string again = graph.nodes[static_cast<size_t>(next)].outputs[0];
    const Value* twin = graph.find(again);
    if (!twin || twin->shape != graph.find(mapped)->shape || graph.readers(again) < 1 ||
        std::find(graph.outputs.begin(), graph.outputs.end(), again) != graph.outputs.end())
      continue;
    for (Node& n : graph.nodes)
      for (std::string& input : n.inputs)
        if (input == again) input = mapped;
    graph.nodes[static_cast<size_t>(next)].op = "";
    graph.nodes[i].op = "";
    graph.values.erase(flat);
    graph.values.erase(again);
  }
  graph.nodes.erase(std::remove_if(graph.nodes.begin(), graph.nodes.end(), [](const Node& n) { return n.op.empty(); }),
                    graph.nodes.end());
  return moved;
}

}  // namespace tunefarm::model
