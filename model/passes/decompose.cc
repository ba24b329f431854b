#include "model/passes/decompose.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/tasks.h"

namespace tunefarm::model {
namespace {

class Decomposer {
 public:
  explicit Decomposer(Graph& graph) : graph_(graph) {}

  // The nodes `node` becomes, or none when it stays as it is.
  StatusOr<std::vector<Node>> rewrite(const Node& node) {
    if (node.op == "Split") return split(node);
    if (node.op == "Conv") {
      TF_ASSIGN_OR_RETURN(std::vector<Node> as_2d, conv1d(node));
      if (!as_2d.empty()) return as_2d;
      TF_ASSIGN_OR_RETURN(std::vector<Node> frames, conv3d(node));
      if (!frames.empty()) return frames;
      TF_ASSIGN_OR_RETURN(std::vector<Node> padded, uneven_padding(node));
      if (!padded.empty()) return padded;
      std::vector<Node> regions = dilated_regions(node);
      return regions.empty() ? grouped_conv(node) : regions;
    }
    if (node.op == "Einsum") return einsum(node);
    if (node.op == "ConvTranspose") return upsampling_conv(node);
    if (node.op == "GroupNormalization") return group_norm(node);
    if (node.op == "MaxPool" || node.op == "AveragePool") {
      TF_ASSIGN_OR_RETURN(std::vector<Node> frames, pool3d(node));
      return frames.empty() ? pool_padding(node) : frames;
    }
    if (node.op == "Resize") return resize3d(node);
    if (node.op == "Attention") return attention(node);
    if (node.op == "LSTM" || node.op == "GRU" || node.op == "RNN") return recurrent(node);
    if (node.op == "MatMul") return broadcast_matmul(node);
    return std::vector<Node>{};
  }

 private:
  std::string constant(const std::string& name, std::vector<int64_t> ints) {
    return graph_.add_int_constant(name, std::move(ints));
  }

  std::string float_constant(const std::string& name, std::vector<int64_t> shape, std::vector<float> floats) {
    Value v;
    v.name = name;
    v.constant = true;
    v.shape = std::move(shape);
    v.floats = std::move(floats);
    graph_.values[name] = std::move(v);
    return name;
  }

  void value(const std::string& name, std::vector<int64_t> shape) {
    Value v;
    v.name = name;
    v.shape = std::move(shape);
    graph_.values[name] = std::move(v);
  }

  Node derived(const Node& from, const std::string& name, const std::string& op, std::vector<std::string> inputs,
               std::string output) {
    Node n;
    n.name = name;
    n.op = op;
    n.inputs = std::move(inputs);
    n.outputs = {std::move(output)};
    n.sources = {from.name};
    return n;
  }

  // x[.., begin:end, ..] along `axis`, as a Slice node writing `out`.
  Node slice(const Node& from, const std::string& name, const std::string& x, int64_t axis, int64_t begin, int64_t end,
             const std::string& out) {
    return derived(from, name, "Slice",
                   {x, constant(name + "/starts", {begin}), constant(name + "/ends", {end}), constant(name + "/axes", {axis})},
                   out);
  }

  // GroupNormalization (Stable Diffusion's UNet and VAE, as opsets 18 and 21 write it) as the
  // TorchScript exporter spells GroupNorm: x [N, C, ...] -> Reshape [N, G, C/G x ...] -> each row
  // normalized (a LayerNormalization without scale) -> Reshape back -> Mul by the scale and Add the
  // bias as constants [C, 1, ...]. Opset 18's scale and bias are one per group (each repeated over
  // its C/G channels), 21's one per channel: told apart by their length.
  StatusOr<std::vector<Node>> group_norm(const Node& node) {
    auto refuse = [&](const std::string& why) { return invalid_argument(fmt::format("node '{}' (GroupNormalization): {}", node.name, why)); };
    if (node.inputs.size() != 3 || node.outputs.size() != 1) return refuse("expects X, scale and bias");
    TF_ASSIGN_OR_RETURN(const Value* x, graph_.value_of(node, node.inputs[0]));
    TF_ASSIGN_OR_RETURN(const Value* scale, graph_.value_of(node, node.inputs[1]));
    TF_ASSIGN_OR_RETURN(const Value* bias, graph_.value_of(node, node.inputs[2]));
    int64_t groups = node.int_attr("num_groups", 0);
    if (x->shape.size() < 2) return refuse("its input has no channel axis");
    int64_t n = x->shape[0], c = x->shape[1];
    if (groups < 1 || c % groups != 0) return refuse(fmt::format("{} channels do not split into {} groups", c, groups));
    auto per_channel = [&](const Value* v, const std::string& name) -> StatusOr<std::string> {
      int64_t count = v->elements();
      if (!v->constant || !v->is_float || static_cast<int64_t>(v->floats.size()) != count || (count != c && count != groups))
        return refuse(fmt::format("its {} must be a constant of {} (channels) or {} (groups) values", name, c, groups));
      std::vector<int64_t> shape(x->shape.size() - 1, 1);
      shape[0] = c;
      std::vector<float> values;
      for (int64_t ch = 0; ch < c; ++ch) values.push_back(v->floats[static_cast<size_t>(count == c ? ch : ch / (c / groups))]);
      return float_constant(node.name + "/" + name, shape, values);
    };
    TF_ASSIGN_OR_RETURN(std::string scale_c, per_channel(scale, "scale"));
    TF_ASSIGN_OR_RETURN(std::string bias_c, per_channel(bias, "bias"));
    std::vector<int64_t> rows = {n, groups, x->elements() / (n * groups)};
    std::string name = node.name;
    std::vector<Node> out;
    value(name + "/rows", rows);
    out.push_back(derived(node, name + "/rows", "Reshape", {x->name, constant(name + "/rows/shape", rows)}, name + "/rows"));
    value(name + "/normalized", rows);
    Node norm = derived(node, name + "/normalized", "LayerNormalization", {name + "/rows"}, name + "/normalized");
    norm.attributes["epsilon"].f = node.float_attr("epsilon", 1e-5f);
    out.push_back(std::move(norm));
    value(name + "/back", x->shape);
    out.push_back(derived(node, name + "/back", "Reshape", {name + "/normalized", constant(name + "/back/shape", x->shape)}, name + "/back"));
    value(name + "/scaled", x->shape);
    out.push_back(derived(node, name + "/scaled", "Mul", {name + "/back", scale_c}, name + "/scaled"));
    out.push_back(derived(node, name + "/shifted", "Add", {name + "/scaled", bias_c}, node.outputs[0]));
    return out;
  }

  // A batched MatMul whose operands' batches differ and broadcast (Falcon's multi-query attention:
  // every head's queries by the one head of keys, [1, 4, 64, 64] by [1, 1, 64, 64]): a right side
  // of one batch becomes the [K, N] matrix all the left side's rows share (one GEMM of batch x M
  // rows, copying nothing); otherwise each operand that broadcasts is expanded to the output's batch.
  StatusOr<std::vector<Node>> broadcast_matmul(const Node& node) {
    if (node.inputs.size() != 2 || node.outputs.size() != 1) return std::vector<Node>{};
    const Value* a = graph_.find(node.inputs[0]);
    const Value* b = graph_.find(node.inputs[1]);
    const Value* y = graph_.find(node.outputs[0]);
    if (!a || !b || !y || a->shape.size() < 2 || b->shape.size() < 3 || y->shape.size() < 2) return std::vector<Node>{};
    std::vector<int64_t> a_batch(a->shape.begin(), a->shape.end() - 2), b_batch(b->shape.begin(), b->shape.end() - 2),
        y_batch(y->shape.begin(), y->shape.end() - 2);
    if (a_batch == b_batch) return std::vector<Node>{};
    int64_t k = b->shape[b->shape.size() - 2], n = b->shape.back();
    std::vector<Node> out;
    if (b->elements() == k * n) {
      std::string matrix = node.name + "/rhs_matrix";
      value(matrix, {k, n});
      out.push_back(derived(node, matrix, "Reshape", {b->name, constant(matrix + "/shape", {k, n})}, matrix));
      if (a->shape.size() == y->shape.size()) {
        out.push_back(derived(node, node.name + "/shared", "MatMul", {a->name, matrix}, node.outputs[0]));
        return out;
      }
      std::vector<int64_t> product_shape = a->shape;
      product_shape.back() = n;
      std::string product = node.name + "/product";
      value(product, product_shape);
      out.push_back(derived(node, product, "MatMul", {a->name, matrix}, product));
      out.push_back(derived(node, node.name + "/ranked", "Reshape", {product, constant(product + "/shape", y->shape)}, node.outputs[0]));
      return out;
    }
    std::vector<std::string> operands;
    for (const Value* v : {a, b}) {
      std::vector<int64_t> batch(v->shape.begin(), v->shape.end() - 2);
      if (batch == y_batch) {
        operands.push_back(v->name);
        continue;
      }
      std::vector<int64_t> full = y_batch;
      full.push_back(v->shape[v->shape.size() - 2]);
      full.push_back(v->shape.back());
      std::string expanded = node.name + (v == a ? "/lhs_expanded" : "/rhs_expanded");
      value(expanded, full);
      out.push_back(derived(node, expanded, "Expand", {v->name, constant(expanded + "/shape", full)}, expanded));
      operands.push_back(expanded);
    }
    out.push_back(derived(node, node.name + "/batched", "MatMul", operands, node.outputs[0]));
    return out;
  }

  // LSTM, GRU and RNN unrolled over their (static) sequence: the input's share of every gate for
  // all the time steps as one MatMul by the transposed input weights (W^T, the biases that add
  // outside a gate's product folded in), then per step and direction the recurrent product
  // MatMul(H, R^T) added to that step's rows, the gates sliced from it, and their activations
  // (the defaults only: sigmoid gates, tanh states), peepholes and state updates as elementwise
  // nodes; Y, Y_h and Y_c assembled by Concat and Reshape where something reads them. The first
  // step of a direction without an initial state reads no recurrent product. Refused: other
  // activations, clip, input_forget, sequence lengths that differ from the sequence, weights
  // computed at run time, and sequences of more than kMaxRecurrentSteps steps (directions
  // included), whose unrolled nodes would each be a step of the built model.
  static constexpr int64_t kMaxRecurrentSteps = 512;

  StatusOr<std::vector<Node>> recurrent(const Node& node) {
    const std::string& op = node.op;
    auto refuse = [&](const std::string& why) { return invalid_argument(fmt::format("node '{}' ({}): {}", node.name, op, why)); };
    auto given = [&](size_t i) { return node.inputs.size() > i && !node.inputs[i].empty(); };
    auto read = [&](size_t o) {
      return node.outputs.size() > o && !node.outputs[o].empty() && graph_.readers(node.outputs[o]) > 0;
    };
    const int64_t gates = op == "LSTM" ? 4 : op == "GRU" ? 3 : 1;
    if (!given(0) || !given(1) || !given(2)) return refuse("expects X, W and R");
    TF_ASSIGN_OR_RETURN(const Value* x, graph_.value_of(node, node.inputs[0]));
    std::string direction = node.attributes.count("direction") ? node.attributes.at("direction").s : "forward";
    if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
      return refuse(fmt::format("direction '{}' is not forward, reverse nor bidirectional", direction));
    const int64_t dirs = direction == "bidirectional" ? 2 : 1;
    const int64_t hidden = node.int_attr("hidden_size", 0);
    const bool batch_first = node.int_attr("layout", 0) != 0;
    if (x->shape.size() != 3 || hidden < 1) return refuse("expects X of [sequence, batch, input] and a hidden_size");
    const int64_t seq = x->shape[batch_first ? 1 : 0], batch = x->shape[batch_first ? 0 : 1], inputs = x->shape[2];
    if (seq * dirs > kMaxRecurrentSteps)
      return refuse(fmt::format("{} steps{} unrolled: at most {} are supported", seq, dirs > 1 ? " in two directions" : "",
                                kMaxRecurrentSteps));
    std::vector<std::string> defaults = op == "LSTM" ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                        : op == "GRU" ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                      : std::vector<std::string>{"Tanh"};
    if (node.attributes.count("activations")) {
      const auto& acts = node.attributes.at("activations").strings;
      for (size_t k = 0; k < acts.size(); ++k)
        if (acts[k] != defaults[k % defaults.size()])
          return refuse(fmt::format("activation '{}' is not supported (only {})", acts[k], fmt::join(defaults, ", ")));
    }
    if (node.attributes.count("clip")) return refuse("clip is not supported");
    if (node.int_attr("input_forget", 0) != 0) return refuse("input_forget is not supported");
    if (given(4)) {
      const Value* lens = graph_.find(node.inputs[4]);
      bool whole = lens && lens->constant && !lens->is_float && static_cast<int64_t>(lens->ints.size()) == lens->elements() &&
                   std::all_of(lens->ints.begin(), lens->ints.end(), [&](int64_t n) { return n == seq; });
      if (!whole) return refuse("sequence_lens other than the whole sequence are not supported");
    }
    // A constant input as floats of the expected count.
    auto weights = [&](size_t i, int64_t count, const char* what) -> StatusOr<const std::vector<float>*> {
      const Value* v = graph_.find(node.inputs[i]);
      if (!v || !v->constant || !v->is_float || static_cast<int64_t>(v->floats.size()) != count)
        return refuse(fmt::format("its {} must be a constant of {} values", what, count));
      return &v->floats;
    };
    const int64_t g_h = gates * hidden;
    TF_ASSIGN_OR_RETURN(const std::vector<float>* w, weights(1, dirs * g_h * inputs, "W"));
    TF_ASSIGN_OR_RETURN(const std::vector<float>* r, weights(2, dirs * g_h * hidden, "R"));
    std::vector<float> zero_bias(static_cast<size_t>(dirs * 2 * g_h), 0.f);
    const std::vector<float>* b = &zero_bias;
    if (given(3)) {
      TF_ASSIGN_OR_RETURN(b, weights(3, dirs * 2 * g_h, "B"));
    }
    const std::vector<float>* peep = nullptr;
    if (op == "LSTM" && given(7)) {
      TF_ASSIGN_OR_RETURN(peep, weights(7, dirs * 3 * hidden, "P"));
    }
    // GRU's linear_before_reset (PyTorch's form) adds R's bias of the new gate inside the reset.
    const bool reset_after = op == "GRU" && node.int_attr("linear_before_reset", 0) != 0;

    const std::string& name = node.name;
    std::vector<Node> out;
    // A node writing a fresh value of `shape`, named after the unrolled node.
    auto add = [&](const std::string& part, const std::string& kind, std::vector<std::string> in, std::vector<int64_t> shape) {
      std::string v = name + "/" + part;
      value(v, shape);
      out.push_back(derived(node, v, kind, std::move(in), v));
      return v;
    };
    const std::vector<int64_t> row = {batch, hidden};
    std::string xs = node.inputs[0];
    if (batch_first && batch > 1) {
      xs = add("x_time_major", "Transpose", {xs}, {seq, batch, inputs});
      out.back().attributes["perm"].ints = {1, 0, 2};
    }
    std::string x_rows = add("x_rows", "Reshape", {xs, constant(name + "/x_rows/shape", {seq * batch, inputs})}, {seq * batch, inputs});
    // An initial state's rows for direction d, or none.
    auto initial = [&](size_t i, int64_t d) -> std::string {
      if (!given(i)) return "";
      std::string part = fmt::format("{}{}", i == 5 ? "h0_" : "c0_", d);
      std::string s = add(part + "_slice", "Slice", {node.inputs[i], constant(name + "/" + part + "/starts", {d}),
                                                     constant(name + "/" + part + "/ends", {d + 1}), constant(name + "/" + part + "/axes", {0})},
                          {1, batch, hidden});
      return add(part, "Reshape", {s, constant(name + "/" + part + "/shape", row)}, row);
    };
    std::vector<std::vector<std::string>> ys(static_cast<size_t>(dirs), std::vector<std::string>(static_cast<size_t>(seq)));
    std::vector<std::string> last_h, last_c;
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string p = fmt::format("d{}/", d);
      auto at = [](const std::vector<float>& v, int64_t i) { return v[static_cast<size_t>(i)]; };
      // W^T [inputs, gates x hidden] and the bias added to X W^T; R^T split where GRU's new gate
      // reads the reset state.
      std::vector<float> wt(static_cast<size_t>(inputs * g_h)), bias(static_cast<size_t>(g_h)), rh_bias;
      for (int64_t j = 0; j < g_h; ++j) {
        for (int64_t k = 0; k < inputs; ++k) wt[static_cast<size_t>(k * g_h + j)] = at(*w, (d * g_h + j) * inputs + k);
        bool inside_reset = reset_after && j >= 2 * hidden;
        bias[static_cast<size_t>(j)] = at(*b, d * 2 * g_h + j) + (inside_reset ? 0.f : at(*b, d * 2 * g_h + g_h + j));
        if (inside_reset) rh_bias.push_back(at(*b, d * 2 * g_h + g_h + j));
      }
      // GRU without linear_before_reset multiplies (r * H) by the new gate's R: its own product.
      const bool split_new_gate = op == "GRU" && !reset_after;
      const int64_t fused_cols = split_new_gate ? 2 * hidden : g_h;
      std::vector<float> rt(static_cast<size_t>(hidden * fused_cols)), rt_new;
      for (int64_t j = 0; j < fused_cols; ++j)
        for (int64_t k = 0; k < hidden; ++k) rt[static_cast<size_t>(k * fused_cols + j)] = at(*r, (d * g_h + j) * hidden + k);
      if (split_new_gate)
        for (int64_t k = 0; k < hidden; ++k)
          for (int64_t j = 0; j < hidden; ++j) rt_new.push_back(at(*r, (d * g_h + 2 * hidden + j) * hidden + k));
      std::string wt_c = float_constant(name + "/" + p + "wt", {inputs, g_h}, std::move(wt));
      std::string bias_c = float_constant(name + "/" + p + "bias", {g_h}, std::move(bias));
      std::string rt_c = float_constant(name + "/" + p + "rt", {hidden, fused_cols}, std::move(rt));
      std::string rt_new_c = split_new_gate ? float_constant(name + "/" + p + "rt_new", {hidden, hidden}, std::move(rt_new)) : "";
      std::string rh_bias_c = reset_after ? float_constant(name + "/" + p + "rh_bias", {hidden}, std::move(rh_bias)) : "";
      auto peephole = [&](int64_t k) {
        std::vector<float> v(peep->begin() + (d * 3 + k) * hidden, peep->begin() + (d * 3 + k + 1) * hidden);
        return float_constant(fmt::format("{}/{}p{}", name, p, k), {hidden}, std::move(v));
      };
      std::string xw = add(p + "xw", "MatMul", {x_rows, wt_c}, {seq * batch, g_h});
      xw = add(p + "xw_bias", "Add", {xw, bias_c}, {seq * batch, g_h});
      std::string h = initial(5, d), c = op == "LSTM" ? initial(6, d) : "";
      for (int64_t s = 0; s < seq; ++s) {
        const int64_t t = d == 1 || direction == "reverse" ? seq - 1 - s : s;
        const std::string q = fmt::format("{}t{}/", p, t);
        auto slice_of = [&](const std::string& v, int64_t axis, int64_t begin, int64_t end, const std::string& part,
                            std::vector<int64_t> shape) {
          return add(q + part, "Slice", {v, constant(name + "/" + q + part + "/starts", {begin}), constant(name + "/" + q + part + "/ends", {end}),
                                         constant(name + "/" + q + part + "/axes", {axis})},
                     std::move(shape));
        };
        std::string xt = slice_of(xw, 0, t * batch, (t + 1) * batch, "x", {batch, g_h});
        std::string hr = h.empty() ? "" : add(q + "hr", "MatMul", {h, rt_c}, {batch, fused_cols});
        auto gate = [&](int64_t k, const std::string& part) {
          std::string v = slice_of(xt, 1, k * hidden, (k + 1) * hidden, part + "_x", row);
          if (hr.empty() || k * hidden >= fused_cols || (reset_after && k == 2)) return v;
          return add(q + part + "_sum", "Add", {v, slice_of(hr, 1, k * hidden, (k + 1) * hidden, part + "_h", row)}, row);
        };
        auto unary = [&](const std::string& kind, const std::string& v, const std::string& part) { return add(q + part, kind, {v}, row); };
        auto binary = [&](const std::string& kind, const std::string& a, const std::string& bv, const std::string& part) {
          return add(q + part, kind, {a, bv}, row);
        };
        if (op == "LSTM") {
          std::string gi = gate(0, "i"), go = gate(1, "o"), gf = gate(2, "f"), gc = gate(3, "c");
          if (peep && !c.empty()) {
            gi = binary("Add", gi, binary("Mul", c, peephole(0), "i_peep"), "i_peeped");
            gf = binary("Add", gf, binary("Mul", c, peephole(2), "f_peep"), "f_peeped");
          }
          std::string i = unary("Sigmoid", gi, "i"), cc = unary("Tanh", gc, "cc");
          std::string next = binary("Mul", i, cc, "ic");
          if (!c.empty()) next = binary("Add", binary("Mul", unary("Sigmoid", gf, "f"), c, "fc"), next, "c");
          c = next;
          if (peep) go = binary("Add", go, binary("Mul", c, peephole(1), "o_peep"), "o_peeped");
          h = binary("Mul", unary("Sigmoid", go, "o"), unary("Tanh", c, "c_tanh"), "h");
        } else if (op == "GRU") {
          std::string z = unary("Sigmoid", gate(0, "z"), "z"), rg = unary("Sigmoid", gate(1, "r"), "r");
          std::string n = gate(2, "n");
          if (reset_after) {
            std::string rec = hr.empty() ? rh_bias_c : binary("Add", slice_of(hr, 1, 2 * hidden, 3 * hidden, "n_h", row), rh_bias_c, "n_rec");
            n = binary("Add", n, hr.empty() ? add(q + "n_reset", "Mul", {rg, rec}, row) : binary("Mul", rg, rec, "n_reset"), "n_sum");
          } else if (!h.empty()) {
            n = binary("Add", n, add(q + "n_rec", "MatMul", {binary("Mul", rg, h, "rh"), rt_new_c}, row), "n_sum");
          }
          n = unary("Tanh", n, "n");
          // (1 - z) n + z H = n + z (H - n); H is zero before the first step.
          std::string carry = h.empty() ? add(q + "neg_n", "Neg", {n}, row) : binary("Sub", h, n, "carry");
          h = binary("Add", n, binary("Mul", z, carry, "z_carry"), "h");
        } else {
          h = unary("Tanh", gate(0, "a"), "h");
        }
        ys[static_cast<size_t>(d)][static_cast<size_t>(t)] = h;
      }
      last_h.push_back(h);
      last_c.push_back(c);
    }
    // The outputs in their layouts: Y [seq, dirs, batch, hidden] (batch first: [batch, seq, dirs,
    // hidden]); Y_h and Y_c [dirs, batch, hidden] ([batch, dirs, hidden]).
    auto finish = [&](const std::string& v, std::vector<int64_t> shape, std::vector<int64_t> perm, const std::string& output) {
      if (batch == 1 || !batch_first) {
        std::vector<int64_t> final_shape(perm.size());
        for (size_t k = 0; k < perm.size(); ++k) final_shape[k] = shape[static_cast<size_t>(perm[k])];
        if (!batch_first) final_shape = shape;
        out.push_back(derived(node, output + "/reshape", "Reshape", {v, constant(output + "/shape", final_shape)}, output));
        return;
      }
      std::string shaped = add(output + "/time_major", "Reshape", {v, constant(output + "/shape", shape)}, shape);
      Node tr = derived(node, output + "/transpose", "Transpose", {shaped}, output);
      tr.attributes["perm"].ints = std::move(perm);
      out.push_back(std::move(tr));
    };
    if (read(0)) {
      std::vector<std::string> parts;
      for (int64_t d = 0; d < dirs; ++d) {
        std::string all = add(fmt::format("y{}", d), "Concat", ys[static_cast<size_t>(d)], {seq * batch, hidden});
        out.back().attributes["axis"].i = 0;
        parts.push_back(add(fmt::format("y{}_4d", d), "Reshape", {all, constant(fmt::format("{}/y{}_4d/shape", name, d), {seq, 1, batch, hidden})},
                            {seq, 1, batch, hidden}));
      }
      std::string y = parts[0];
      if (dirs > 1) {
        y = add("y", "Concat", parts, {seq, dirs, batch, hidden});
        out.back().attributes["axis"].i = 1;
      }
      finish(y, {seq, dirs, batch, hidden}, {2, 0, 1, 3}, node.outputs[0]);
    }
    for (size_t o : {size_t{1}, size_t{2}}) {
      if (!read(o)) continue;
      if (o == 2 && op != "LSTM") return refuse("has no Y_c output");
      const auto& states = o == 1 ? last_h : last_c;
      std::string all = states[0];
      if (dirs > 1) {
        all = add(o == 1 ? "y_h" : "y_c", "Concat", states, {dirs * batch, hidden});
        out.back().attributes["axis"].i = 0;
      }
      finish(all, {dirs, batch, hidden}, {1, 0, 2}, node.outputs[o]);
    }
    return out;
  }

  // Attention (opsets 23, 24: scaled_dot_product_attention as one operator) as the nodes exporters
  // write for it, which the passes after this one take as they take those: 3-D Q, K and V split
  // into heads (Reshape, Transpose), K and V heads repeated for grouped-query attention (Reshape,
  // Expand, Reshape), the scores MatMul(Q, K transposed), scaled (Mul), masked (a boolean mask by
  // Where with the lowest float, a float one and is_causal's upper-left triangle of -inf added),
  // Softmax, then MatMul by V (zeroed for queries a boolean mask lets attend nothing) and, for 3-D
  // inputs, the heads merged back. Refused: a KV cache (past_key,
  // past_value, nonpad_kv_seqlen), softcap, and a node whose cache or score outputs are read.
  StatusOr<std::vector<Node>> attention(const Node& node) {
    auto refuse = [&](const std::string& why) { return invalid_argument(fmt::format("node '{}' (Attention): {}", node.name, why)); };
    auto given = [&](size_t i) { return node.inputs.size() > i && !node.inputs[i].empty(); };
    if (!given(0) || !given(1) || !given(2) || node.outputs.empty()) return refuse("expects Q, K and V");
    if (given(4) || given(5) || given(6)) return refuse("a KV cache (past_key, past_value, nonpad_kv_seqlen) is not supported");
    for (size_t o = 1; o < node.outputs.size(); ++o)
      if (!node.outputs[o].empty() && graph_.readers(node.outputs[o]) > 0)
        return refuse("its present_key, present_value and qk_matmul_output are not supported");
    if (node.float_attr("softcap", 0.f) != 0.f) return refuse("softcap is not supported");
    TF_ASSIGN_OR_RETURN(const Value* q, graph_.value_of(node, node.inputs[0]));
    TF_ASSIGN_OR_RETURN(const Value* k, graph_.value_of(node, node.inputs[1]));
    TF_ASSIGN_OR_RETURN(const Value* v, graph_.value_of(node, node.inputs[2]));
    TF_ASSIGN_OR_RETURN(const Value* y, graph_.value_of(node, node.outputs[0]));
    size_t rank = q->shape.size();
    if ((rank != 3 && rank != 4) || k->shape.size() != rank || v->shape.size() != rank)
      return refuse("Q, K and V must all be 3-D or all 4-D");
    std::string name = node.name;
    std::vector<Node> out;
    int64_t batch = q->shape[0];
    // [B, S, heads x d] -> [B, heads, S, d].
    auto heads_of = [&](const Value* t, int64_t heads, const std::string& tag) -> StatusOr<std::string> {
      if (rank == 4) return t->name;
      if (heads < 1 || t->shape[2] % heads != 0) return refuse(fmt::format("{} of width {} does not split into {} heads", tag, t->shape[2], heads));
      std::vector<int64_t> split = {batch, t->shape[1], heads, t->shape[2] / heads}, moved = {batch, heads, t->shape[1], t->shape[2] / heads};
      value(name + "/" + tag + "_split", split);
      out.push_back(derived(node, name + "/" + tag + "_split", "Reshape", {t->name, constant(name + "/" + tag + "_split/shape", split)},
                            name + "/" + tag + "_split"));
      value(name + "/" + tag + "_heads", moved);
      Node t4 = derived(node, name + "/" + tag + "_heads", "Transpose", {name + "/" + tag + "_split"}, name + "/" + tag + "_heads");
      t4.attributes["perm"].ints = {0, 2, 1, 3};
      out.push_back(std::move(t4));
      return name + "/" + tag + "_heads";
    };
    int64_t q_heads = rank == 4 ? q->shape[1] : node.int_attr("q_num_heads", 0);
    int64_t kv_heads = rank == 4 ? k->shape[1] : node.int_attr("kv_num_heads", 0);
    TF_ASSIGN_OR_RETURN(std::string qh, heads_of(q, q_heads, "q"));
    TF_ASSIGN_OR_RETURN(std::string kh, heads_of(k, kv_heads, "k"));
    TF_ASSIGN_OR_RETURN(std::string vh, heads_of(v, kv_heads, "v"));
    const std::vector<int64_t> q4 = graph_.values[qh].shape, k4 = graph_.values[kh].shape, v4 = graph_.values[vh].shape;
    if (q4[3] != k4[3] || k4[2] != v4[2] || kv_heads < 1 || q_heads % kv_heads != 0 || k4[0] != batch || v4[0] != batch)
      return refuse("Q, K and V do not agree in batch, head size, sequence or heads");
    int64_t sq = q4[2], skv = k4[2], group = q_heads / kv_heads;
    // Grouped-query attention: each K and V head serves `group` query heads.
    auto repeated = [&](const std::string& t, const std::vector<int64_t>& s, const std::string& tag) {
      if (group == 1) return t;
      std::vector<int64_t> one = {batch, kv_heads, 1, s[2], s[3]}, wide = {batch, kv_heads, group, s[2], s[3]},
                           merged = {batch, q_heads, s[2], s[3]};
      std::string base = name + "/" + tag + "_repeat";
      value(base + "_one", one);
      out.push_back(derived(node, base + "_one", "Reshape", {t, constant(base + "_one/shape", one)}, base + "_one"));
      value(base + "_wide", wide);
      out.push_back(derived(node, base + "_wide", "Expand", {base + "_one", constant(base + "_wide/shape", wide)}, base + "_wide"));
      value(base, merged);
      out.push_back(derived(node, base, "Reshape", {base + "_wide", constant(base + "/shape", merged)}, base));
      return base;
    };
    kh = repeated(kh, k4, "k");
    vh = repeated(vh, v4, "v");
    value(name + "/k_t", {batch, q_heads, k4[3], skv});
    Node kt = derived(node, name + "/k_t", "Transpose", {kh}, name + "/k_t");
    kt.attributes["perm"].ints = {0, 1, 3, 2};
    out.push_back(std::move(kt));
    std::vector<int64_t> scores_shape = {batch, q_heads, sq, skv};
    value(name + "/scores", scores_shape);
    out.push_back(derived(node, name + "/scores", "MatMul", {qh, name + "/k_t"}, name + "/scores"));
    auto scalar = [&](const std::string& n, float f) { return float_constant(n, {}, {f}); };
    float scale = node.attributes.count("scale") ? node.float_attr("scale", 1.f) : static_cast<float>(1.0 / std::sqrt(double(q4[3])));
    value(name + "/scaled", scores_shape);
    out.push_back(derived(node, name + "/scaled", "Mul", {name + "/scores", scalar(name + "/scale", scale)}, name + "/scaled"));
    std::string s = name + "/scaled";
    const float inf = std::numeric_limits<float>::infinity();
    // A boolean mask's queries that attend some key (1) or none (0), for their outputs.
    std::string attends;
    if (given(3)) {
      TF_ASSIGN_OR_RETURN(const Value* mask, graph_.value_of(node, node.inputs[3]));
      if (mask->shape.empty() || mask->shape.back() != skv) return refuse("its mask must cover the keys (its last axis as long as K's sequence)");
      value(name + "/masked", scores_shape);
      // A boolean mask (held as 0 and 1, not float) says which keys a query attends. A query that
      // attends none has output 0, as ONNX Runtime gives: its hidden scores are the lowest float,
      // not -inf (whose softmax would be NaN), and its output is multiplied by 0.
      if (!mask->is_float) {
        out.push_back(derived(node, name + "/masked", "Where",
                              {mask->name, s, scalar(name + "/hidden", std::numeric_limits<float>::lowest())}, name + "/masked"));
        std::vector<int64_t> attends_shape = mask->shape;
        attends_shape.back() = 1;
        attends = name + "/attends";
        value(attends, attends_shape);
        Node any = derived(node, attends, "ReduceMax", {mask->name}, attends);
        any.attributes["axes"].ints = {-1};
        any.attributes["keepdims"].i = 1;
        out.push_back(std::move(any));
      } else {
        out.push_back(derived(node, name + "/masked", "Add", {s, mask->name}, name + "/masked"));
      }
      s = name + "/masked";
    }
    if (node.int_attr("is_causal", 0) != 0) {
      std::vector<float> causal;
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < skv; ++j) causal.push_back(j <= i ? 0.f : -inf);
      value(name + "/causal_masked", scores_shape);
      out.push_back(derived(node, name + "/causal_masked", "Add", {s, float_constant(name + "/causal", {sq, skv}, causal)},
                            name + "/causal_masked"));
      s = name + "/causal_masked";
    }
    value(name + "/probs", scores_shape);
    Node softmax = derived(node, name + "/probs", "Softmax", {s}, name + "/probs");
    softmax.attributes["axis"].i = -1;
    out.push_back(std::move(softmax));
    std::vector<int64_t> context = {batch, q_heads, sq, v4[3]};
    // The context of the heads, as `to`: zeroed where a query attends no key.
    auto context_as = [&](const std::string& to) {
      if (attends.empty()) {
        out.push_back(derived(node, name + "/context", "MatMul", {name + "/probs", vh}, to));
        return;
      }
      value(name + "/attended", context);
      out.push_back(derived(node, name + "/attended", "MatMul", {name + "/probs", vh}, name + "/attended"));
      out.push_back(derived(node, name + "/context", "Mul", {name + "/attended", attends}, to));
    };
    if (rank == 4) {
      context_as(y->name);
      return out;
    }
    value(name + "/context", context);
    context_as(name + "/context");
    value(name + "/merged", {batch, sq, q_heads, v4[3]});
    Node merged = derived(node, name + "/merged", "Transpose", {name + "/context"}, name + "/merged");
    merged.attributes["perm"].ints = {0, 2, 1, 3};
    out.push_back(std::move(merged));
    out.push_back(derived(node, name + "/output", "Reshape", {name + "/merged", constant(name + "/output/shape", y->shape)}, y->name));
    return out;
  }

  StatusOr<std::vector<Node>> split(const Node& node) {
    TF_ASSIGN_OR_RETURN(const Value* x, graph_.value_of(node, node.inputs.at(0)));
    int64_t rank = static_cast<int64_t>(x->shape.size());
    int64_t axis = node.int_attr("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return invalid_argument(fmt::format("node '{}' (Split): axis out of range", node.name));
    std::vector<Node> out;
    int64_t begin = 0;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      TF_ASSIGN_OR_RETURN(const Value* part, graph_.value_of(node, node.outputs[k]));
      if (part->shape.size() != x->shape.size())
        return invalid_argument(fmt::format("node '{}' (Split): output {} has another rank than its input", node.name, k));
      int64_t end = begin + part->shape[static_cast<size_t>(axis)];
      out.push_back(slice(node, fmt::format("{}/{}", node.name, k), x->name, axis, begin, end, node.outputs[k]));
      begin = end;
    }
    return out;
  }

  // A ConvTranspose whose windows do not overlap (stride = kernel, no padding: U-Net's 2x2 up
  // convolutions) is a GEMM of each input pixel's channels by the weight as [C, K*R*S] — a dense
  // task — whose [.., K, R, S] products are laid out as the output's R x S blocks: x [N, C, H, W]
  // -> [N, H*W, C] -> MatMul -> [N, H, W, K, R, S] -> Transpose [N, K, H, R, W, S] -> [N, K, H*R,
  // W*S], then the bias. Others stay ConvTranspose (a step of its own, operators.h).
  StatusOr<std::vector<Node>> upsampling_conv(const Node& node) {
    if (node.inputs.size() < 2 || node.outputs.size() != 1 || node.int_attr("group", 1) != 1) return std::vector<Node>{};
    TF_ASSIGN_OR_RETURN(const Value* x, graph_.value_of(node, node.inputs[0]));
    TF_ASSIGN_OR_RETURN(const Value* w, graph_.value_of(node, node.inputs[1]));
    TF_ASSIGN_OR_RETURN(const Value* y, graph_.value_of(node, node.outputs[0]));
    if (x->shape.size() != 4 || w->shape.size() != 4 || !w->constant || w->floats.size() != static_cast<size_t>(w->elements()))
      return std::vector<Node>{};
    int64_t n = x->shape[0], c = x->shape[1], h = x->shape[2], wd = x->shape[3];
    int64_t k = w->shape[1], r = w->shape[2], s = w->shape[3];
    auto all = [](const std::vector<int64_t>& v, int64_t value) {
      return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == value; });
    };
    std::vector<int64_t> strides = node.ints_attr("strides");
    if (w->shape[0] != c || strides != std::vector<int64_t>{r, s} || !all(node.ints_attr("pads"), 0) ||
        !all(node.ints_attr("dilations"), 1) || !all(node.ints_attr("output_padding"), 0) ||
        (node.attributes.count("auto_pad") && node.attributes.at("auto_pad").s != "NOTSET") ||
        y->shape != std::vector<int64_t>{n, k, h * r, wd * s})
      return std::vector<Node>{};
    const Value* bias = node.inputs.size() > 2 && !node.inputs[2].empty() ? graph_.find(node.inputs[2]) : nullptr;
    if (bias && (!bias->constant || static_cast<int64_t>(bias->floats.size()) != k)) return std::vector<Node>{};
    std::string name = node.name;
    Value weight = *w;
    weight.name = name + "/weight";
    weight.shape = {c, k * r * s};
    graph_.values[weight.name] = std::move(weight);
    std::vector<Node> out;
    auto reshape = [&](const std::string& from, const std::string& to, std::vector<int64_t> shape) {
      value(to, shape);
      out.push_back(derived(node, to, "Reshape", {from, constant(to + "/shape", shape)}, to));
    };
    auto transpose = [&](const std::string& from, const std::string& to, std::vector<int64_t> shape, std::vector<int64_t> perm) {
      value(to, std::move(shape));
      Node t = derived(node, to, "Transpose", {from}, to);
      t.attributes["perm"].ints = std::move(perm);
      out.push_back(std::move(t));
    };
    reshape(x->name, name + "/pixels", {n, c, h * wd});
    transpose(name + "/pixels", name + "/rows", {n, h * wd, c}, {0, 2, 1});
    value(name + "/products", {n, h * wd, k * r * s});
    out.push_back(derived(node, name + "/products", "MatMul", {name + "/rows", name + "/weight"}, name + "/products"));
    reshape(name + "/products", name + "/blocks", {n, h, wd, k, r, s});
    transpose(name + "/blocks", name + "/placed", {n, k, h, r, wd, s}, {0, 3, 1, 4, 2, 5});
    std::string last = bias ? name + "/unbiased" : node.outputs[0];
    value(name + "/unbiased", y->shape);
    out.push_back(derived(node, last, "Reshape", {name + "/placed", constant(name + "/unbiased/shape", y->shape)}, last));
    if (bias) {
      Value b = *bias;
      b.name = name + "/bias";
      b.shape = {k, 1, 1};
      graph_.values[b.name] = std::move(b);
      out.push_back(derived(node, name + "/bias_add", "Add", {last, name + "/bias"}, node.outputs[0]));
    }
    return out;
  }

  // A 1-D convolution (Whisper's and wav2vec 2.0's audio front ends, TCNs) as a 2-D one over a map
  // of one row: x [N, C, L] -> Pad along L (the 2-D templates pad every side alike, and a row of one
  // must not grow) -> [N, C, 1, L] -> Conv with a 1 x k kernel, the stride and dilation on both axes
  // (the one row's output is one row whatever they are) -> [N, K, 1, L'] -> [N, K, L']. Bias, groups
  // and the activations after it stay the 2-D Conv's.
  // A 3-D convolution of one clip (video networks: R3D, R(2+1)D; 3-D U-Nets) as 2-D convolutions
  // over its frames: the clip depth-major with its frames as the batch ([D, C, H, W], padded in
  // depth), for each depth tap the frames it reads (a Slice, strided by the depth stride) through
  // that tap's 2-D weight, the taps' outputs summed, and the result back to [1, K, D', H', W'].
  // Each 2-D convolution is rewritten in turn (uneven padding, groups over a batch).
  StatusOr<std::vector<Node>> conv3d(const Node& node) {
    if (node.inputs.size() < 2 || node.outputs.size() != 1) return std::vector<Node>{};
    const Value* x = graph_.find(node.inputs[0]);
    const Value* w = graph_.find(node.inputs[1]);
    const Value* y = graph_.find(node.outputs[0]);
    if (!x || !w || !y || x->shape.size() != 5 || w->shape.size() != 5 || y->shape.size() != 5) return std::vector<Node>{};
    auto refuse = [&](const std::string& why) { return invalid_argument(fmt::format("node '{}' (Conv): {}", node.name, why)); };
    std::string auto_pad = node.attributes.count("auto_pad") ? node.attributes.at("auto_pad").s : "NOTSET";
    if (x->shape[0] != 1) return refuse("a 3-D convolution over a batch of more than one clip is not supported");
    if (!w->constant || static_cast<int64_t>(w->floats.size()) != w->elements()) return refuse("its weight must be a constant");
    if (auto_pad != "NOTSET" && auto_pad != "VALID") return refuse("auto_pad is not supported for 3-D convolutions");
    auto three = [&](const char* key, int64_t fallback) {
      std::vector<int64_t> v = node.ints_attr(key);
      return v.empty() ? std::vector<int64_t>(3, fallback) : v;
    };
    std::vector<int64_t> strides = three("strides", 1), dilations = three("dilations", 1), pads = node.ints_attr("pads");
    if (pads.empty() || auto_pad == "VALID") pads = std::vector<int64_t>(6, 0);
    if (strides.size() != 3 || dilations.size() != 3 || pads.size() != 6) return refuse("strides, dilations or pads are not 3-D");
    if (!positive(strides) || !positive(dilations) || std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; }))
      return refuse("strides and dilations must be positive and pads not negative");
    const int64_t c = x->shape[1], depth = x->shape[2] + pads[0] + pads[3], k = w->shape[0], taps = w->shape[2];
    const int64_t frames = y->shape[2], h = x->shape[3], wd = x->shape[4];
    const std::string& name = node.name;
    std::vector<Node> out;
    std::string clip = clip_frames(node, *x, out);
    if (pads[0] != 0 || pads[3] != 0) {
      std::string padded = name + "/padded";
      value(padded, {depth, c, h, wd});
      out.push_back(derived(node, padded, "Pad", {clip, constant(padded + "/pads", {pads[0], 0, 0, 0, pads[3], 0, 0, 0})}, padded));
      clip = padded;
    }
    std::vector<std::string> partials;
    const int64_t per_tap = w->shape[3] * w->shape[4];
    for (int64_t d = 0; d < taps; ++d) {
      std::string tap = fmt::format("{}/tap{}", name, d);
      std::string in = tap_frames(node, clip, {depth, c, h, wd}, d * dilations[0], frames, strides[0], out);
      std::vector<float> weight;
      for (int64_t o = 0; o < k * w->shape[1]; ++o)
        weight.insert(weight.end(), w->floats.begin() + (o * taps + d) * per_tap, w->floats.begin() + (o * taps + d + 1) * per_tap);
      std::vector<std::string> inputs = {in, float_constant(tap + "/weight", {k, w->shape[1], w->shape[3], w->shape[4]}, std::move(weight))};
      if (d == 0 && node.inputs.size() > 2 && !node.inputs[2].empty()) inputs.push_back(node.inputs[2]);
      value(tap, {frames, k, y->shape[3], y->shape[4]});
      Node conv = derived(node, tap, "Conv", inputs, tap);
      conv.attributes["kernel_shape"].ints = {w->shape[3], w->shape[4]};
      conv.attributes["strides"].ints = {strides[1], strides[2]};
      conv.attributes["dilations"].ints = {dilations[1], dilations[2]};
      conv.attributes["pads"].ints = {pads[1], pads[2], pads[4], pads[5]};
      conv.attributes["group"].i = node.int_attr("group", 1);
      TF_ASSIGN_OR_RETURN(std::vector<Node> rewritten, rewrite(conv));
      if (rewritten.empty()) rewritten.push_back(std::move(conv));
      for (Node& n : rewritten) out.push_back(std::move(n));
      partials.push_back(tap);
    }
    std::string sum = partials[0];
    if (partials.size() > 1) {
      sum = name + "/sum";
      value(sum, {frames, k, y->shape[3], y->shape[4]});
      out.push_back(derived(node, sum, "Sum", partials, sum));
    }
    frames_clip(node, sum, *y, out);
    return out;
  }

  static bool positive(const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x > 0; });
  }

  // A clip [1, C, D, H, W] as its frames, [D, C, H, W] (depth-major, the frames a batch): the
  // nodes that write it into `out`, and its name.
  std::string clip_frames(const Node& node, const Value& x, std::vector<Node>& out) {
    const std::vector<int64_t>& s = x.shape;
    std::string clip = node.name + "/frames";
    value(clip + "/t", {1, s[2], s[1], s[3], s[4]});
    Node t = derived(node, clip + "/t", "Transpose", {x.name}, clip + "/t");
    t.attributes["perm"].ints = {0, 2, 1, 3, 4};
    out.push_back(std::move(t));
    value(clip, {s[2], s[1], s[3], s[4]});
    out.push_back(derived(node, clip, "Reshape", {clip + "/t", constant(clip + "/shape", {s[2], s[1], s[3], s[4]})}, clip));
    return clip;
  }

  // Frames [D', K, H', W'] back to the clip `y` [1, K, D', H', W'].
  void frames_clip(const Node& node, const std::string& frames, const Value& y, std::vector<Node>& out) {
    const std::vector<int64_t>& s = y.shape;
    std::string back = node.name + "/back";
    value(back, {1, s[2], s[1], s[3], s[4]});
    out.push_back(derived(node, back, "Reshape", {frames, constant(back + "/shape", {1, s[2], s[1], s[3], s[4]})}, back));
    Node t = derived(node, node.name + "/channels", "Transpose", {back}, y.name);
    t.attributes["perm"].ints = {0, 2, 1, 3, 4};
    out.push_back(std::move(t));
  }

  // The frames of `clip` ([depth, ...]) a depth tap of a window reads for `count` outputs `stride`
  // apart, from frame `first`: a Slice, or the clip itself where that is all of it.
  std::string tap_frames(const Node& node, const std::string& clip, const std::vector<int64_t>& shape, int64_t first,
                         int64_t count, int64_t stride, std::vector<Node>& out) {
    int64_t last = first + (count - 1) * stride;
    if (first == 0 && last == shape[0] - 1 && stride == 1) return clip;
    std::string in = fmt::format("{}/tap{}/frames", node.name, first);
    std::vector<int64_t> sliced = shape;
    sliced[0] = count;
    value(in, sliced);
    out.push_back(derived(node, in, "Slice",
                          {clip, constant(in + "/starts", {first}), constant(in + "/ends", {last + 1}), constant(in + "/axes", {0}),
                           constant(in + "/steps", {stride})},
                          in));
    return in;
  }

  // 3-D max and average pooling of one clip (a 3-D U-Net's 2x2x2, S3D's 1x3x3): the window's rows
  // and columns pooled per frame (the frames a batch, as conv3d), then the maximum or mean of the
  // depth taps' frames. Frames padded in depth read the lowest float (max) or zeros counted in the
  // mean (count_include_pad); dilations in depth, ceil_mode reaching past the frames and a mean
  // that leaves padded frames out are refused.
  StatusOr<std::vector<Node>> pool3d(const Node& node) {
    const Value* x = graph_.find(node.inputs.at(0));
    const Value* y = node.outputs.empty() ? nullptr : graph_.find(node.outputs[0]);
    if (!x || !y || x->shape.size() != 5 || y->shape.size() != 5 || node.outputs.size() != 1) return std::vector<Node>{};
    auto refuse = [&](const std::string& why) { return invalid_argument(fmt::format("node '{}' ({}): {}", node.name, node.op, why)); };
    std::vector<int64_t> kernel = node.ints_attr("kernel_shape"), strides = node.ints_attr("strides"), pads = node.ints_attr("pads"),
                         dilations = node.ints_attr("dilations");
    if (strides.empty()) strides = {1, 1, 1};
    if (pads.empty()) pads = std::vector<int64_t>(6, 0);
    if (dilations.empty()) dilations = {1, 1, 1};
    bool max = node.op == "MaxPool";
    if (x->shape[0] != 1) return refuse("3-D pooling over a batch of more than one clip is not supported");
    if (kernel.size() != 3 || strides.size() != 3 || pads.size() != 6 || dilations.size() != 3)
      return refuse("kernel_shape, strides, pads or dilations are not 3-D");
    if (node.attributes.count("auto_pad") && node.attributes.at("auto_pad").s != "NOTSET") return refuse("auto_pad is not supported");
    if (!positive(kernel) || !positive(strides) || !positive(dilations) ||
        std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p < 0; }))
      return refuse("kernel_shape, strides and dilations must be positive and pads not negative");
    if (dilations[0] != 1) return refuse("dilation in depth is not supported");
    bool include_pad = node.int_attr("count_include_pad", 0) != 0;
    if (!max && !include_pad && (pads[0] != 0 || pads[3] != 0))
      return refuse("an average over padded frames that leaves the padding out of its count is not supported");
    int64_t depth = x->shape[2] + pads[0] + pads[3], frames = y->shape[2];
    if ((frames - 1) * strides[0] + kernel[0] > depth) return refuse("windows reach past the frames (ceil_mode in depth)");
    std::vector<Node> out;
    std::string clip = clip_frames(node, *x, out);
    std::vector<int64_t> shape = {depth, x->shape[1], x->shape[3], x->shape[4]};
    if (pads[0] != 0 || pads[3] != 0) {
      std::string padded = node.name + "/padded";
      value(padded, shape);
      std::vector<std::string> in = {clip, constant(padded + "/pads", {pads[0], 0, 0, 0, pads[3], 0, 0, 0})};
      if (max) in.push_back(float_constant(padded + "/lowest", {}, {std::numeric_limits<float>::lowest()}));
      out.push_back(derived(node, padded, "Pad", in, padded));
      clip = padded;
    }
    std::string pooled = node.name + "/pooled";
    shape = {depth, x->shape[1], y->shape[3], y->shape[4]};
    value(pooled, shape);
    Node pool = derived(node, pooled, node.op, {clip}, pooled);
    pool.attributes = node.attributes;
    pool.attributes["kernel_shape"].ints = {kernel[1], kernel[2]};
    pool.attributes["strides"].ints = {strides[1], strides[2]};
    pool.attributes["pads"].ints = {pads[1], pads[2], pads[4], pads[5]};
    if (node.attributes.count("dilations")) pool.attributes["dilations"].ints = {dilations[1], dilations[2]};
    TF_ASSIGN_OR_RETURN(std::vector<Node> rewritten, pool_padding(pool));
    if (rewritten.empty()) rewritten.push_back(std::move(pool));
    for (Node& n : rewritten) out.push_back(std::move(n));
    std::vector<std::string> taps;
    for (int64_t t = 0; t < kernel[0]; ++t) taps.push_back(tap_frames(node, pooled, shape, t, frames, strides[0], out));
    std::vector<int64_t> frames_shape = {frames, x->shape[1], y->shape[3], y->shape[4]};
    std::string result = taps[0];
    if (taps.size() > 1) {
      result = node.name + "/taps";
      value(result, frames_shape);
      out.push_back(derived(node, result, max ? "Max" : "Sum", taps, result));
      if (!max) {
        std::string mean = node.name + "/mean";
        value(mean, frames_shape);
        out.push_back(derived(node, mean, "Mul", {result, float_constant(mean + "/scale", {}, {1.f / float(kernel[0])})}, mean));
        result = mean;
      }
    }
    frames_clip(node, result, *y, out);
    return out;
  }

  // Resize of a clip's depth, rows and columns (a 3-D U-Net's upsampling): separable in each mode,
  // the rows and columns resized as [N, C*D, H, W], then the depth as the rows of
  // [N, C, D, H'*W'] (its columns by a scale of 1, which leaves them as they are).
  StatusOr<std::vector<Node>> resize3d(const Node& node) {
    const Value* x = graph_.find(node.inputs.at(0));
    const Value* y = node.outputs.size() == 1 ? graph_.find(node.outputs[0]) : nullptr;
    if (!x || !y || x->shape.size() != 5 || y->shape.size() != 5) return std::vector<Node>{};
    const std::vector<int64_t>&xs = x->shape, &ys = y->shape;
    if (xs[0] != ys[0] || xs[1] != ys[1])
      return invalid_argument(fmt::format("node '{}' (Resize): only the depth, rows and columns of a clip are resized", node.name));
    std::vector<float> scales;
    if (node.inputs.size() > 2 && !node.inputs[2].empty()) {
      const Value* v = graph_.find(node.inputs[2]);
      if (v && v->constant && v->is_float && v->floats.size() == 5) scales = v->floats;
    }
    std::vector<Node> out;
    auto resize = [&](const std::string& in, const std::string& name, std::vector<int64_t> shape, std::vector<float> by) {
      value(name, shape);
      Node r = derived(node, name, "Resize", {in}, name);
      r.attributes = node.attributes;
      if (!by.empty()) {
        r.inputs = {in, "", float_constant(name + "/scales", {4}, std::move(by))};
      } else {
        r.inputs = {in, "", "", constant(name + "/sizes", shape)};
      }
      out.push_back(std::move(r));
    };
    std::string planes = node.name + "/planes";
    value(planes, {xs[0], xs[1] * xs[2], xs[3], xs[4]});
    out.push_back(derived(node, planes, "Reshape", {x->name, constant(planes + "/shape", {xs[0], xs[1] * xs[2], xs[3], xs[4]})}, planes));
    resize(planes, planes + "/resized", {xs[0], xs[1] * xs[2], ys[3], ys[4]},
           scales.empty() ? std::vector<float>{} : std::vector<float>{1.f, 1.f, scales[3], scales[4]});
    std::string depth = node.name + "/depth";
    value(depth, {xs[0], xs[1], xs[2], ys[3] * ys[4]});
    out.push_back(derived(node, depth, "Reshape", {planes + "/resized", constant(depth + "/shape", {xs[0], xs[1], xs[2], ys[3] * ys[4]})}, depth));
    resize(depth, depth + "/resized", {xs[0], xs[1], ys[2], ys[3] * ys[4]},
           scales.empty() ? std::vector<float>{} : std::vector<float>{1.f, 1.f, scales[2], 1.f});
    out.push_back(derived(node, node.name + "/clip", "Reshape", {depth + "/resized", constant(node.name + "/clip/shape", ys)}, y->name));
    return out;
  }

  StatusOr<std::vector<Node>> conv1d(const Node& node) {
    if (node.inputs.size() < 2 || node.outputs.size() != 1) return std::vector<Node>{};
    TF_ASSIGN_OR_RETURN(const Value* x, graph_.value_of(node, node.inputs[0]));
    TF_ASSIGN_OR_RETURN(const Value* w, graph_.value_of(node, node.inputs[1]));
    TF_ASSIGN_OR_RETURN(const Value* y, graph_.value_of(node, node.outputs[0]));
    std::string auto_pad = node.attributes.count("auto_pad") ? node.attributes.at("auto_pad").s : "NOTSET";
    if (x->shape.size() != 3 || w->shape.size() != 3 || y->shape.size() != 3 || !w->constant ||
        (auto_pad != "NOTSET" && auto_pad != "VALID"))
      return std::vector<Node>{};
    auto one = [&](const char* key, int64_t fallback) {
      std::vector<int64_t> v = node.ints_attr(key);
      return v.size() == 1 ? v[0] : fallback;
    };
    std::vector<int64_t> pads = node.ints_attr("pads");
    if (pads.empty() || auto_pad == "VALID") pads = {0, 0};
    if (pads.size() != 2) return std::vector<Node>{};
    int64_t stride = one("strides", 1), dilation = one("dilations", 1);
    int64_t n = x->shape[0], c = x->shape[1], l = x->shape[2] + pads[0] + pads[1];
    std::string name = node.name;
    std::vector<Node> out;
    std::string padded = x->name;
    if (pads[0] != 0 || pads[1] != 0) {
      padded = name + "/padded";
      value(padded, {n, c, l});
      out.push_back(derived(node, padded, "Pad", {x->name, constant(padded + "/pads", {0, 0, pads[0], 0, 0, pads[1]})}, padded));
    }
    std::string row = name + "/row";
    value(row, {n, c, 1, l});
    out.push_back(derived(node, row, "Reshape", {padded, constant(row + "/shape", {n, c, 1, l})}, row));
    Value weight = *w;
    weight.name = name + "/weight";
    weight.shape = {w->shape[0], w->shape[1], 1, w->shape[2]};
    graph_.values[weight.name] = std::move(weight);
    std::string conv = name + "/conv";
    value(conv, {y->shape[0], y->shape[1], 1, y->shape[2]});
    std::vector<std::string> inputs = {row, name + "/weight"};
    if (node.inputs.size() > 2 && !node.inputs[2].empty()) inputs.push_back(node.inputs[2]);
    Node c2 = derived(node, conv, "Conv", inputs, conv);
    c2.attributes["kernel_shape"].ints = {1, w->shape[2]};
    c2.attributes["strides"].ints = {stride, stride};
    c2.attributes["dilations"].ints = {dilation, dilation};
    c2.attributes["pads"].ints = {0, 0, 0, 0};
    c2.attributes["group"].i = node.int_attr("group", 1);
    c2.name = name;
    out.push_back(std::move(c2));
    out.push_back(derived(node, name + "/back", "Reshape", {conv, constant(name + "/back/shape", y->shape)}, y->name));
    return out;
  }

  // A 2-D Conv padded unevenly, or by auto_pad SAME_UPPER / SAME_LOWER (TensorFlow's models through
  // tf2onnx: a stride-2 convolution of an even map pads one more at the end): the templates pad
  // every side alike, so the padding becomes a Pad of its own and the Conv pads nothing; SAME padding
  // that is even becomes the Conv's explicit pads.
  // A 2-D window's pads [top, left, bottom, right] as `node` has them, its auto_pad SAME_UPPER or
  // SAME_LOWER worked out (the output ceil(in / stride), the padding it needs split evenly, the
  // odd one at the end or the start) and VALID as none; false where they do not describe 2-D.
  bool window_pads(const Node& node, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel, std::vector<int64_t>& pads) {
    std::string auto_pad = node.attributes.count("auto_pad") ? node.attributes.at("auto_pad").s : "NOTSET";
    std::vector<int64_t> strides = node.ints_attr("strides"), dilations = node.ints_attr("dilations");
    if (strides.empty()) strides = {1, 1};
    if (dilations.empty()) dilations = {1, 1};
    pads = node.ints_attr("pads");
    if (pads.empty() || auto_pad != "NOTSET") pads.assign(4, 0);
    if (strides.size() != 2 || dilations.size() != 2 || kernel.size() != 2 || in.size() != 2 || pads.size() != 4) return false;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      for (size_t d = 0; d < 2; ++d) {
        if (strides[d] < 1) return false;
        int64_t out = (in[d] + strides[d] - 1) / strides[d];
        int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - in[d]);
        int64_t small = total / 2, large = total - small;
        pads[d] = auto_pad == "SAME_UPPER" ? small : large;
        pads[d + 2] = auto_pad == "SAME_UPPER" ? large : small;
      }
    }
    return auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  }

  // MaxPool and AveragePool with auto_pad: its pads written out (the pooling steps take uneven ones).
  StatusOr<std::vector<Node>> pool_padding(const Node& node) {
    if (!node.attributes.count("auto_pad") || node.attributes.at("auto_pad").s == "NOTSET" || node.inputs.empty())
      return std::vector<Node>{};
    TF_ASSIGN_OR_RETURN(const Value* x, graph_.value_of(node, node.inputs[0]));
    std::vector<int64_t> pads;
    if (x->shape.size() != 4 || !window_pads(node, {x->shape[2], x->shape[3]}, node.ints_attr("kernel_shape"), pads))
      return std::vector<Node>{};
    Node pool = node;
    pool.attributes.erase("auto_pad");
    pool.attributes["pads"].ints = pads;
    return std::vector<Node>{pool};
  }

  StatusOr<std::vector<Node>> uneven_padding(const Node& node) {
    if (node.inputs.size() < 2 || node.outputs.size() != 1) return std::vector<Node>{};
    TF_ASSIGN_OR_RETURN(const Value* x, graph_.value_of(node, node.inputs[0]));
    TF_ASSIGN_OR_RETURN(const Value* w, graph_.value_of(node, node.inputs[1]));
    if (x->shape.size() != 4 || w->shape.size() != 4) return std::vector<Node>{};
    std::string auto_pad = node.attributes.count("auto_pad") ? node.attributes.at("auto_pad").s : "NOTSET";
    std::vector<int64_t> pads;
    if (!window_pads(node, {x->shape[2], x->shape[3]}, {w->shape[2], w->shape[3]}, pads)) return std::vector<Node>{};
    Node conv = node;
    conv.attributes.erase("auto_pad");
    if (std::all_of(pads.begin(), pads.end(), [&](int64_t p) { return p == pads[0]; })) {
      if (auto_pad == "NOTSET" || auto_pad == "VALID") return std::vector<Node>{};
      conv.attributes["pads"].ints = pads;
      return std::vector<Node>{conv};
    }
    std::string padded = node.name + "/padded";
    value(padded, {x->shape[0], x->shape[1], x->shape[2] + pads[0] + pads[2], x->shape[3] + pads[1] + pads[3]});
    Node pad = derived(node, padded, "Pad", {x->name, constant(padded + "/pads", {0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]})}, padded);
    conv.inputs[0] = padded;
    conv.attributes["pads"].ints = {0, 0, 0, 0};
    return std::vector<Node>{pad, conv};
  }

  // A band of output positions along one axis of a dilated convolution, and the taps that read
  // inside the input for all of them: [first_tap, last_tap].
  struct Band {
    int64_t begin, end, first_tap, last_tap;
  };

  // The bands of `outputs` positions over an axis of `size` inputs read by `taps` taps `dilation`
  // apart after `pad` zeros (stride 1), split where a tap starts or stops reading inside the
  // input; the taps that do form a run. Empty where a band has none (its outputs are the bias).
  static std::vector<Band> bands(int64_t outputs, int64_t size, int64_t taps, int64_t dilation, int64_t pad) {
    std::vector<int64_t> cuts = {0, outputs};
    auto lo = [&](int64_t r) { return std::clamp<int64_t>(pad - r * dilation, 0, outputs); };
    auto hi = [&](int64_t r) { return std::clamp<int64_t>(size + pad - r * dilation, 0, outputs); };
    for (int64_t r = 0; r < taps; ++r) cuts.insert(cuts.end(), {lo(r), hi(r)});
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    std::vector<Band> out;
    for (size_t k = 0; k + 1 < cuts.size(); ++k) {
      Band b{cuts[k], cuts[k + 1], -1, -1};
      for (int64_t r = 0; r < taps; ++r)
        if (lo(r) <= b.begin && b.end <= hi(r)) {
          if (b.first_tap < 0) b.first_tap = r;
          b.last_tap = r;
        }
      if (b.first_tap < 0) return {};
      out.push_back(b);
    }
    return out;
  }

  // A dilated convolution whose taps read mostly padding (DeepLabV3's atrous pyramid: rates 12, 24
  // and 36 over a 16x16 to 65x65 map) as one convolution per region of its output where the same
  // taps read inside the input, each of those taps alone over the input it reads, without padding,
  // and the regions concatenated back. Computed whole, every tap of every output is multiplied
  // (by zeros where it reads padding): rate 12 over 16x16, a quarter of its taps read the input,
  // ran 4.5 ms where the taps that count are 1.1 ms of work. Only where at most 3/4 of the work
  // counts and what is saved outweighs the regions' slices, conversions and concatenations many
  // times (a dilated depthwise convolution of MobileNetV3's backbone in 25 regions ran slower):
  // stride 1, no groups, at most 9 regions, 50 MFLOP saved.
  std::vector<Node> dilated_regions(const Node& node) {
    constexpr size_t kMaxRegions = 9;
    constexpr double kLeastSaved = 50e6;
    const Value* x = graph_.find(node.inputs[0]);
    const Value* w = node.inputs.size() > 1 ? graph_.find(node.inputs[1]) : nullptr;
    const Value* y = graph_.find(node.outputs[0]);
    std::vector<int64_t> dil = node.ints_attr("dilations"), strides = node.ints_attr("strides"), pads = node.ints_attr("pads");
    std::string auto_pad = node.attributes.count("auto_pad") ? node.attributes.at("auto_pad").s : "NOTSET";
    if (!x || !w || !y || x->shape.size() != 4 || w->shape.size() != 4 || y->shape.size() != 4 || !w->constant ||
        static_cast<int64_t>(w->floats.size()) != w->elements() || dil.size() != 2 || (dil[0] == 1 && dil[1] == 1) ||
        (!strides.empty() && strides != std::vector<int64_t>{1, 1}) || (auto_pad != "NOTSET" && !auto_pad.empty()) ||
        node.int_attr("group", 1) != 1)
      return {};
    if (pads.empty()) pads = {0, 0, 0, 0};
    std::vector<Band> rows = bands(y->shape[2], x->shape[2], w->shape[2], dil[0], pads[0]);
    std::vector<Band> cols = bands(y->shape[3], x->shape[3], w->shape[3], dil[1], pads[1]);
    if (rows.empty() || cols.empty() || rows.size() * cols.size() < 2 || rows.size() * cols.size() > kMaxRegions) return {};
    auto work = [](const std::vector<Band>& axis, int64_t outputs, int64_t taps) {
      double counted = 0;
      for (const Band& b : axis) counted += double(b.end - b.begin) * double(b.last_tap - b.first_tap + 1);
      return counted / (double(outputs) * double(taps));
    };
    double counted = work(rows, y->shape[2], w->shape[2]) * work(cols, y->shape[3], w->shape[3]);
    double flops = 2.0 * double(w->elements()) * double(y->shape[0] * y->shape[2] * y->shape[3]);
    if (counted > 0.75 || (1 - counted) * flops < kLeastSaved) return {};
    std::vector<Node> out;
    std::vector<std::string> row_parts;
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<std::string> parts;
      for (size_t j = 0; j < cols.size(); ++j) {
        const Band &r = rows[i], &c = cols[j];
        std::string name = fmt::format("{}/region{}_{}", node.name, i, j);
        int64_t taps_r = r.last_tap - r.first_tap + 1, taps_c = c.last_tap - c.first_tap + 1;
        int64_t top = r.begin - pads[0] + r.first_tap * dil[0], left = c.begin - pads[1] + c.first_tap * dil[1];
        int64_t bottom = r.end - 1 - pads[0] + r.last_tap * dil[0] + 1, right = c.end - 1 - pads[1] + c.last_tap * dil[1] + 1;
        value(name + "/in", {x->shape[0], x->shape[1], bottom - top, right - left});
        out.push_back(derived(node, name + "/in", "Slice",
                              {x->name, constant(name + "/starts", {top, left}), constant(name + "/ends", {bottom, right}),
                               constant(name + "/axes", {2, 3})},
                              name + "/in"));
        std::vector<float> taps;
        for (int64_t k = 0; k < w->shape[0] * w->shape[1]; ++k)
          for (int64_t a = r.first_tap; a <= r.last_tap; ++a)
            for (int64_t b = c.first_tap; b <= c.last_tap; ++b)
              taps.push_back(w->floats[static_cast<size_t>((k * w->shape[2] + a) * w->shape[3] + b)]);
        std::string weight = float_constant(name + "/weight", {w->shape[0], w->shape[1], taps_r, taps_c}, std::move(taps));
        Node conv = node;
        conv.name = name;
        conv.sources = {node.name};
        conv.inputs[0] = name + "/in";
        conv.inputs[1] = weight;
        conv.outputs = {name};
        conv.attributes["pads"].ints = {0, 0, 0, 0};
        conv.attributes["kernel_shape"].ints = {taps_r, taps_c};
        // Along an axis of one tap the dilation means nothing: the other axis', as the kernels
        // take one dilation for both.
        int64_t d_r = taps_r > 1 ? dil[0] : taps_c > 1 ? dil[1] : 1, d_c = taps_c > 1 ? dil[1] : d_r;
        conv.attributes["dilations"].ints = {d_r, d_c};
        value(name, {y->shape[0], y->shape[1], r.end - r.begin, c.end - c.begin});
        out.push_back(std::move(conv));
        parts.push_back(name);
      }
      std::string row = cols.size() == 1 ? parts[0] : fmt::format("{}/row{}", node.name, i);
      if (cols.size() > 1) {
        value(row, {y->shape[0], y->shape[1], rows[i].end - rows[i].begin, y->shape[3]});
        out.push_back(derived(node, row, "Concat", parts, row));
        out.back().attributes["axis"].i = 3;
      }
      row_parts.push_back(row);
    }
    if (rows.size() == 1) {
      out.back().outputs = {node.outputs[0]};
      return out;
    }
    out.push_back(derived(node, node.name + "/regions", "Concat", row_parts, node.outputs[0]));
    out.back().attributes["axis"].i = 2;
    return out;
  }

  // A depthwise convolution with `multiplier` filters per channel (PiT's pooling, FastViT's stem:
  // [C*M, 1, R, S] weights over C channels in C groups) as the depthwise convolution of one filter
  // per channel over the input with each channel repeated M times (Reshape, Expand, Reshape):
  // output channel k reads input channel k / M either way.
  StatusOr<std::vector<Node>> depthwise_multiplier(const Node& node, const Value& x, int64_t multiplier) {
    const std::vector<int64_t>& s = x.shape;
    std::string name = node.name + "/repeated";
    std::vector<int64_t> rows = {s[0], s[1], 1, s[2] * s[3]}, wide = {s[0], s[1], multiplier, s[2] * s[3]},
                         repeated = {s[0], s[1] * multiplier, s[2], s[3]};
    std::vector<Node> out;
    value(name + "/rows", rows);
    out.push_back(derived(node, name + "/rows", "Reshape", {x.name, constant(name + "/rows/shape", rows)}, name + "/rows"));
    value(name + "/wide", wide);
    out.push_back(derived(node, name + "/wide", "Expand", {name + "/rows", constant(name + "/wide/shape", wide)}, name + "/wide"));
    value(name, repeated);
    out.push_back(derived(node, name, "Reshape", {name + "/wide", constant(name + "/shape", repeated)}, name));
    Node conv = node;
    conv.inputs[0] = name;
    conv.attributes["group"].i = s[1] * multiplier;
    conv.sources = {node.name};
    out.push_back(std::move(conv));
    return out;
  }

  StatusOr<std::vector<Node>> grouped_conv(const Node& node) {
    int64_t groups = node.int_attr("group", 1);
    // A batch of one runs as one step over its groups (model/tasks.h grouped_conv_groups).
    if (groups <= 1 || node.inputs.size() < 2 || grouped_conv_groups(graph_, node) > 1) return std::vector<Node>{};
    TF_ASSIGN_OR_RETURN(const Value* x, graph_.value_of(node, node.inputs[0]));
    TF_ASSIGN_OR_RETURN(const Value* w, graph_.value_of(node, node.inputs[1]));
    TF_ASSIGN_OR_RETURN(const Value* y, graph_.value_of(node, node.outputs.at(0)));
    if (x->shape.size() != 4 || w->shape.size() != 4 || !w->constant || w->floats.empty()) return std::vector<Node>{};
    int64_t c = x->shape[1], k = w->shape[0];
    if (groups == c && k > c && k % c == 0) return depthwise_multiplier(node, *x, k / c);
    // One input channel per group is a depthwise convolution, which has its own template.
    if (c % groups != 0 || k % groups != 0 || c / groups == 1) return std::vector<Node>{};
    const Value* bias = node.inputs.size() > 2 && !node.inputs[2].empty() ? graph_.find(node.inputs[2]) : nullptr;
    if (bias && (!bias->constant || static_cast<int64_t>(bias->floats.size()) != k)) return std::vector<Node>{};
    int64_t cg = c / groups, kg = k / groups, per_filter = w->elements() / k;
    std::vector<Node> out;
    std::vector<std::string> parts;
    for (int64_t g = 0; g < groups; ++g) {
      std::string name = fmt::format("{}/group{}", node.name, g);
      std::string in = name + "/in";
      value(in, {x->shape[0], cg, x->shape[2], x->shape[3]});
      out.push_back(slice(node, name + "/slice", x->name, 1, g * cg, (g + 1) * cg, in));
      Value wg;
      wg.name = name + "/weight";
      wg.constant = true;
      wg.shape = {kg, cg, w->shape[2], w->shape[3]};
      wg.floats.assign(w->floats.begin() + g * kg * per_filter, w->floats.begin() + (g + 1) * kg * per_filter);
      graph_.values[wg.name] = std::move(wg);
      std::vector<std::string> inputs = {in, name + "/weight"};
      if (bias) {
        Value bg;
        bg.name = name + "/bias";
        bg.constant = true;
        bg.shape = {kg};
        bg.floats.assign(bias->floats.begin() + g * kg, bias->floats.begin() + (g + 1) * kg);
        graph_.values[bg.name] = std::move(bg);
        inputs.push_back(name + "/bias");
      }
      std::string result = name + "/out";
      value(result, {y->shape[0], kg, y->shape[2], y->shape[3]});
      Node conv = derived(node, name, "Conv", inputs, result);
      conv.attributes = node.attributes;
      conv.attributes["group"].i = 1;
      out.push_back(std::move(conv));
      parts.push_back(result);
    }
    Node concat = derived(node, node.name + "/concat", "Concat", parts, node.outputs[0]);
    concat.attributes["axis"].i = 1;
    out.push_back(std::move(concat));
    return out;
  }

  StatusOr<std::vector<Node>> einsum(const Node& node) {
    auto refuse = [&](const std::string& why) {
      return invalid_argument(fmt::format("node '{}' (Einsum): {}", node.name, why));
    };
    std::string eq = node.attributes.count("equation") ? node.attributes.at("equation").s : "";
    eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
    size_t comma = eq.find(','), arrow = eq.find("->");
    if (node.inputs.size() != 2 || comma == std::string::npos || arrow == std::string::npos || arrow < comma ||
        eq.find('.') != std::string::npos)
      return refuse(fmt::format("equation '{}' is not of two operands with an explicit output", eq));
    std::string a = eq.substr(0, comma), b = eq.substr(comma + 1, arrow - comma - 1), o = eq.substr(arrow + 2);
    TF_ASSIGN_OR_RETURN(const Value* va, graph_.value_of(node, node.inputs[0]));
    TF_ASSIGN_OR_RETURN(const Value* vb, graph_.value_of(node, node.inputs[1]));
    if (a.size() != va->shape.size() || b.size() != vb->shape.size())
      return refuse(fmt::format("equation '{}' does not match the operands' ranks", eq));
    std::map<char, int64_t> size;
    for (size_t i = 0; i < a.size(); ++i) size[a[i]] = va->shape[i];
    for (size_t i = 0; i < b.size(); ++i) size[b[i]] = vb->shape[i];
    auto has = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
    std::string batch, m, n, k;
    for (char c : a) {
      if (std::count(a.begin(), a.end(), c) > 1) return refuse("an index repeated within an operand is not supported");
      if (has(b, c) && has(o, c)) batch += c;
      else if (has(b, c)) k += c;
      else if (has(o, c)) m += c;
      else return refuse(fmt::format("index '{}' summed within one operand is not supported", c));
    }
    for (char c : b) {
      if (std::count(b.begin(), b.end(), c) > 1) return refuse("an index repeated within an operand is not supported");
      if (!has(a, c) && has(o, c)) n += c;
      else if (!has(a, c)) return refuse(fmt::format("index '{}' summed within one operand is not supported", c));
    }
    // A (batched) matrix product: one contracted index, one of B's own, and of A's own one, or
    // several when nothing is batched (B is then a 2-D weight every row of A meets).
    if (k.size() != 1 || n.size() != 1 || m.empty() || (m.size() > 1 && !batch.empty()))
      return refuse(fmt::format("equation '{}' is not a matrix product of the forms supported", eq));
    std::vector<Node> out;
    auto transposed = [&](const std::string& from_letters, const std::string& to_letters, const std::string& input,
                          const std::string& tag) -> std::string {
      if (from_letters == to_letters) return input;
      std::string name = fmt::format("{}/{}", node.name, tag);
      std::vector<int64_t> perm, shape;
      for (char c : to_letters) {
        perm.push_back(static_cast<int64_t>(from_letters.find(c)));
        shape.push_back(size[c]);
      }
      value(name, shape);
      Node t = derived(node, name, "Transpose", {input}, name);
      t.attributes["perm"].ints = perm;
      out.push_back(std::move(t));
      return name;
    };
    std::string lhs = transposed(a, batch + m + k, node.inputs[0], "lhs");
    std::string rhs = transposed(b, batch + k + n, node.inputs[1], "rhs");
    std::string product_letters = batch + m + n;
    std::string product = product_letters == o ? node.outputs[0] : node.name + "/product";
    if (product != node.outputs[0]) {
      std::vector<int64_t> shape;
      for (char c : product_letters) shape.push_back(size[c]);
      value(product, shape);
    }
    out.push_back(derived(node, node.name + "/matmul", "MatMul", {lhs, rhs}, product));
    if (product != node.outputs[0]) {
      Node t = derived(node, node.name + "/output", "Transpose", {product}, node.outputs[0]);
      for (char c : o) t.attributes["perm"].ints.push_back(static_cast<int64_t>(product_letters.find(c)));
      out.push_back(std::move(t));
    }
    return out;
  }

  Graph& graph_;
};

}  // namespace

StatusOr<int> decompose(Graph& graph) {
  Decomposer d(graph);
  std::vector<Node> nodes;
  int count = 0;
  for (Node& node : graph.nodes) {
    TF_ASSIGN_OR_RETURN(std::vector<Node> parts, d.rewrite(node));
    if (parts.empty()) {
      nodes.push_back(std::move(node));
      continue;
    }
    ++count;
    for (Node& p : parts) nodes.push_back(std::move(p));
  }
  graph.nodes = std::move(nodes);
  return count;
}

}  // namespace tunefarm::model
