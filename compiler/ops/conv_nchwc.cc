// Channel-blocked convolution, conv2d_nchwc (TVM's conv2d_NCHWc, oneDNN's nChw16c): activations in
// NCHW[x]c — input [N, C/ic, H, W, ic], output [N, K/oc, P, Q, oc] — and weights packed to
// OIHW[x]i[y]o, [K/oc, C/ic, R, S, ic, oc], by whoever holds them (a model build packs them once).
//
// Why: with 7x7 or 14x14 outputs there is nothing to vectorize along a row, which is what the
// NCHW templates do. Here a vector is a block of output channels: each step of the reduction loads
// one vector of packed weights per output-channel block of the tile and broadcasts one input value
// per output column of the tile, and every (column, block) pair is one FMA into an accumulator
// register. The register tile (output columns x channel blocks), the reduction order and the
// unrolling are knobs. A winograd=m workload (its weight transformed) is Winograd's template's,
// conv_winograd.cc, which blocked_conv_ops() registers beside the direct one.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "compiler/ops/conv_nchwc.h"
#include "compiler/ops/op.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::ops {
namespace {

using ir::Expr;
using ir::Var;

using operators::ConvEpilogue;

ConvEpilogue conv_epilogue_of(const Workload& w) { return operators::conv_shape(w).epilogue; }

using Blocked = operators::ConvShape;

Blocked blocked_of(const Workload& w) { return operators::conv_shape(w); }

void blocked_reference(const Workload& w, const std::vector<const float*>& in, float* out) {
  Blocked b = blocked_of(w);
  const float* x = in[0];
  const float* wt = in[1];
  ConvEpilogue e = conv_epilogue_of(w);
  const float* bias = e.bias ? in[2] : nullptr;
  const float* residual = e.residual ? in[e.bias ? 3 : 2] : nullptr;
  for (int64_t n = 0; n < b.N; ++n)
    for (int64_t k = 0; k < b.K; ++k)
      for (int64_t p = 0; p < b.P; ++p)
        for (int64_t q = 0; q < b.Q; ++q) {
          double acc = 0.0;
          for (int64_t c = 0; c < b.C; ++c)
            for (int64_t r = 0; r < b.R; ++r)
              for (int64_t s = 0; s < b.S; ++s) {
                int64_t h = p * b.stride + r * b.dil - b.pad, x_ = q * b.stride + s * b.dil - b.pad;
                if (h < 0 || h >= b.H || x_ < 0 || x_ >= b.W) continue;
                double xv = x[(((n * b.cb() + c / b.ic) * b.H + h) * b.W + x_) * b.ic + c % b.ic];
                double wv = wt[((((k / b.oc * b.cb() + c / b.ic) * b.R + r) * b.S + s) * b.ic + c % b.ic) * b.oc + k % b.oc];
                acc += xv * wv;
              }
          int64_t o = (((n * b.kb() + k / b.oc) * b.P + p) * b.Q + q) * b.oc + k % b.oc;
          out[o] = static_cast<float>(epilogue_value(e, acc, bias ? bias[k] : 0.f, residual ? residual[o] : 0.f));
        }
}

struct BlockedTensors {
  te::Tensor input, weight, padded, sum, out;  // out is sum when there is no epilogue.
  std::vector<te::Tensor> epilogue_inputs;
  te::IterVar rcb, rr, rs, rci;
};

// `pad_stage`: the zero-padded input as a stage of its own, so that the reduction reads without
// bounds checks; otherwise reads are guarded (the naive reference).
BlockedTensors define_blocked(const Blocked& b, const ConvEpilogue& e, bool pad_stage) {
  BlockedTensors t;
  t.input = te::placeholder("input", operators::conv_input_shape(b));
  t.weight = te::placeholder("weight", operators::conv_weight_shape(b));
  te::Tensor in = t.input;
  auto guarded = guarded_read(in, b.H, b.W, b.pad);
  Read5 read = guarded;
  if (pad_stage && b.pad > 0) {
    t.padded = te::compute("padded", {b.N, b.cb(), b.H + 2 * b.pad, b.W + 2 * b.pad, b.ic},
                           [&](const std::vector<Var>& v) { return guarded(v[0], v[1], v[2], v[3], v[4]); },
                           {"pn", "pc", "ph", "pw", "pci"});
    te::Tensor pd = t.padded;
    read = [pd](Expr n, Expr c, Expr h, Expr w, Expr ci) -> Expr { return pd(n, c, h, w, ci); };
  }
  t.rcb = te::reduce_axis(b.cb(), "rcb");
  t.rr = te::reduce_axis(b.R, "rr");
  t.rs = te::reduce_axis(b.S, "rs");
  t.rci = te::reduce_axis(b.ic, "rci");
  te::Tensor wt = t.weight;
  std::vector<int64_t> shape = operators::conv_output_shape(b);
  t.sum = te::compute(e.any() ? "sum" : "output", shape, [&](const std::vector<Var>& v) {
    Expr h = Expr(v[2]) * b.stride + Expr(t.rr->var) * b.dil, w = Expr(v[3]) * b.stride + Expr(t.rs->var) * b.dil;
    Expr x = read(v[0], t.rcb->var, h, w, t.rci->var);
    return te::sum(x * wt(v[1], t.rcb->var, t.rr->var, t.rs->var, t.rci->var, v[4]), {t.rcb, t.rr, t.rs, t.rci});
  }, {"n", "kb", "p", "q", "ko"});
  t.out = epilogue_stage(e, t.sum, shape, t.epilogue_inputs);
  return t;
}

ComputeDef blocked_compute(const Workload& w) {
  BlockedTensors t = define_blocked(blocked_of(w), conv_epilogue_of(w), false);
  return ComputeDef{conv_inputs(t.input, t.weight, t.epilogue_inputs), t.out};
}


// Output columns a register tile may take: the fixed candidates, and the whole row where it fits
// the accumulators and none of them divides it (17, Inception-v3's 17x17 maps; 13, 11).
std::vector<int64_t> column_tiles(const Blocked& b) {
  std::vector<int64_t> tiles = {1, 2, 3, 4, 5, 6, 7, 8, 12, 14, 16, 28};
  if (b.Q <= kMaxAccVectors && std::find(tiles.begin(), tiles.end(), b.Q) == tiles.end()) tiles.push_back(b.Q);
  return tiles;
}

ConfigSpace blocked_space(const std::string& name, const Blocked& b) {
  ConfigSpace s(name);
  s.define_split_candidates("tile_q", {column_tiles(b)});
  s.define_split_candidates("tile_kb", {{1, 2, 3, 4}});
  // Orders of the reduction over input-channel blocks, window rows and window columns; the
  // channels within a block stay innermost (one broadcast per column and step).
  s.define_reorder("reduce_order", {{0, 1, 2}, {1, 2, 0}, {1, 0, 2}, {2, 0, 1}});
  s.define_knob("unroll_window", std::vector<int64_t>{1, 0});
  s.define_knob("unroll_ci", std::vector<int64_t>{0, 1});
  s.define_annotate("parallel", {"none", "outer"});
  // 1: the zero-padded input is a stage of its own (a copy of the whole input); 0: the reduction
  // reads the input through bounds guards, which loop partitioning removes from interior tiles
  // and, with the window unrolled, resolves in the border ones (skipping the padding's taps).
  s.define_knob("pad_stage", std::vector<int64_t>{1, 0});
  int64_t oc = b.oc, ic = b.ic, window = b.R * b.S;
  s.set_validator([oc, ic, window](const Config& cfg) -> Status {
    int64_t qr = knob_list(cfg, "tile_q")[1], kr = knob_list(cfg, "tile_kb")[1];
    int64_t acc = qr * kr * vectors(oc);
    if (acc > kMaxAccVectors)
      return invalid_argument(fmt::format("register tile needs {} vector accumulators (at most {})", acc, kMaxAccVectors));
    // Fully unrolled, the tile times the channels of a block times the window is the loop body.
    // Past ~500 FMAs it spills the instruction cache and takes seconds to compile; past ~128 the
    // compile time grows (median 50 ms a candidate at 512, 28 ms at 128) while the fastest
    // configs found by tuning stay below it (the default: 14 columns x 9 window positions).
    int64_t body = acc * (knob_int(cfg, "unroll_ci") ? ic : 1) * (knob_int(cfg, "unroll_window") ? window : 1);
    if (body > kMaxUnrolledFmas)
      return invalid_argument(fmt::format("unrolled loop body of {} FMAs (at most {})", body, kMaxUnrolledFmas));
    return Status();
  });
  return s;
}

Config blocked_default(const std::string& name, const Blocked& b, const CpuModel& cpu) {
  Config cfg;
  cfg.template_name = name;
  // About 14 accumulators of 32 registers (7 of AVX2's 16): enough independent FMAs to hide their
  // latency, leaving registers for the weight vectors. Columns first (each reuses the weights
  // already loaded), then channel blocks.
  int64_t acc = std::max<int64_t>(1, cpu.vector_registers * 14 / 32);
  int64_t oc_vectors = (b.oc + cpu.lanes - 1) / cpu.lanes;
  int64_t most = cpu.vector_registers * kMaxAccVectors / 32;
  // A 40-channel block's 3 vectors in a row of 14 take 7 columns, not 2 (0.77x as fast as the tuned
  // 8 columns: MobileNetV3-Small's 1x1 40->120 at 14x14).
  const std::vector<int64_t> columns = {1, 2, 3, 4, 5, 6, 7, 8, 12, 14};
  // Half the columns and two channel blocks: each input broadcast then feeds two FMAs, 9 vector
  // loads per 14 FMAs instead of 15, under the two loads a cycle that feed two FMAs. At a stride
  // (a column's input read at the stride): ResNet-50 v1.5's 3x3 128@56 at stride 2, 230 -> 260
  // GFLOP/s with 7 x 2 for 14 x 1; its 1x1 256->512, 210 -> 261. With AVX-512 at stride 1 too,
  // where the output channels pair up: 1.09-1.20x on ten ResNet-50 and FCN layers (an AMD EPYC
  // Zen 5, bench/RESULTS.md session 27); an odd count of blocks would leave one block a column.
  bool pairs = b.kb() >= 2 && (b.stride > 1 || (cpu.lanes == 16 && b.kb() % 2 == 0));
  int64_t blocks_per_column = pairs ? 2 : 1;
  int64_t qr = pick_register_columns(columns, b.Q, oc_vectors * blocks_per_column, acc, most);
  int64_t kr = pick_tile({1, 2, 3, 4}, b.kb(), std::max<int64_t>(1, acc / (qr * oc_vectors)));
  if (qr * kr * oc_vectors * 2 <= acc && b.Q * oc_vectors <= most) {
    // No column tile divides the row (17, 13): a tile of the whole row, where one of a column
    // (and 4 channel blocks) was half the speed of oneDNN on Inception-v3's 1x1 768->192 at
    // 17x17, each weight vector loaded for one FMA. A tile that does not divide the row (6 or 14
    // of 17) leaves a tail that runs as variable-extent loops: no faster than the whole row.
    // (Tiles of several rows were no faster either: a 5x5 map whole in 25 accumulators ran at
    // 0.8x of 5 columns by 2 channel blocks, the weights then coming from L2 but every input
    // broadcast once per FMA.)
    qr = b.Q;
    kr = pick_tile({1, 2, 3, 4}, b.kb(), std::max<int64_t>(1, most / (qr * oc_vectors)));
  } else if (qr * kr * oc_vectors * 2 <= acc) {
    qr = columns_of_a_long_row(columns, b.Q, oc_vectors, acc);
    kr = pick_tile({1, 2, 3, 4}, b.kb(), std::max<int64_t>(1, acc / (qr * oc_vectors)));
  }
  // Unrolled, the window around the tile stays within the loop body the space allows.
  bool unroll_window = b.R * b.S <= 9 && qr * kr * oc_vectors * b.R * b.S <= kMaxUnrolledFmas;
  // Guarded reads instead of a padded copy wherever the window is unrolled: loop partitioning
  // then peels the border rows and columns, whose guards become constants, so the interior reads
  // without them and the window positions in the padding are not computed at all (1.15x on 3x3
  // 512@5x5, 1.10x at 14x14, 1.04x at 56x56 where only the copy is saved). With the window
  // as a loop the guards stay: a select per position and column.
  bool guard = unroll_window && b.pad > 0;
  cfg.knobs = {{"tile_q", std::vector<int64_t>{-1, qr}},
               {"tile_kb", std::vector<int64_t>{-1, kr}},
               {"reduce_order", std::vector<int64_t>{0, 1, 2}},
               {"unroll_window", int64_t{unroll_window ? 1 : 0}},
               {"unroll_ci", int64_t{0}},
               {"parallel", std::string("none")},
               {"pad_stage", int64_t{guard ? 0 : 1}}};
  return cfg;
}

StatusOr<Scheduled> blocked_schedule(const Workload& w, const Config& cfg) {
  Blocked b = blocked_of(w);
  int64_t qr = knob_list(cfg, "tile_q")[1], kr = knob_list(cfg, "tile_kb")[1];
  const auto& rorder = knob_list(cfg, "reduce_order");
  bool par = knob_str(cfg, "parallel") == "outer";
  BlockedTensors t = define_blocked(b, conv_epilogue_of(w), knob_int(cfg, "pad_stage") != 0);
  auto owned = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{t.out});
  schedule::Schedule& s = *owned;
  te::Tensor acc = local_sum(s, t.sum, t.out);
  auto& out = s[t.out];
  te::IterVar n = out.axis(0), kb = out.axis(1), p = out.axis(2), q = out.axis(3), ko = out.axis(4);
  auto [kbo, kbi] = out.split(kb, kr);
  auto [qo, qi] = out.split(q, qr);
  out.reorder({n, kbo, p, qo, kbi, qi, ko});
  out.vectorize(ko);
  out.unroll(qi);
  out.unroll(kbi);
  // Threads take tiles of output-channel blocks, each reading only its tiles' weights. Where
  // there are too few tiles to share evenly (the narrow layers of mobile networks), they split
  // each tile's rows instead. Not as one loop fused from both: bounds inferred through the fused
  // index span every row, so the register tile became a buffer of all of them (0.75x on one
  // thread), and a guarded last tile could not be split off (0.4x).
  constexpr int64_t kEnoughTiles = 16;
  int64_t tiles = (b.kb() + kr - 1) / kr;
  if (par) out.parallel(tiles >= kEnoughTiles ? kbo : p);

  auto& a = s[acc];
  a.compute_at(out, qo);
  te::IterVar akb = a.axis(1), aq = a.axis(3), ako = a.axis(4);
  std::vector<te::IterVar> red = {a.reduce_axis(0), a.reduce_axis(1), a.reduce_axis(2)};
  std::vector<te::IterVar> order = {a.axis(0), a.axis(2)};
  for (int64_t i : rorder) order.push_back(red[static_cast<size_t>(i)]);
  order.push_back(a.reduce_axis(3));
  order.push_back(akb);
  order.push_back(aq);
  order.push_back(ako);
  a.reorder(order);
  a.vectorize(ako);
  a.unroll(aq);
  a.unroll(akb);
  if (knob_int(cfg, "unroll_ci") != 0) a.unroll(a.reduce_axis(3));
  if (knob_int(cfg, "unroll_window") != 0) {
    a.unroll(a.reduce_axis(1));
    a.unroll(a.reduce_axis(2));
  }
  if (t.padded.op) {
    auto& pd = s[t.padded];
    pd.vectorize(pd.op()->axes.back());
    if (par) pd.parallel(pd.axis(1));
  }
  return Scheduled{std::move(owned), kernel_args(t.input, t.weight, t.epilogue_inputs, t.out)};
}

// ---- depthwise_conv2d_nchwc: one filter per channel, channels in blocks of a vector ----
//
// Input [N, C/b, H, W, b], weights [C/b, R, S, b], output [N, C/b, P, Q, b]. Every step of the
// window loads one vector of weights and, per output column of the register tile, one vector of
// inputs (contiguous: the block), and does one FMA; there is no reduction over channels to share
// loads across, so the tile's columns are what reuses the weight vector.

using Depthwise = operators::ConvShape;

Depthwise depthwise_of(const Workload& w) { return operators::conv_shape(w); }

void depthwise_reference(const Workload& w, const std::vector<const float*>& in, float* out) {
  Depthwise d = depthwise_of(w);
  ConvEpilogue e = conv_epilogue_of(w);
  const float* bias = e.bias ? in[2] : nullptr;
  const float* residual = e.residual ? in[e.bias ? 3 : 2] : nullptr;
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t p = 0; p < d.P; ++p)
        for (int64_t q = 0; q < d.Q; ++q) {
          double acc = 0.0;
          for (int64_t r = 0; r < d.R; ++r)
            for (int64_t s = 0; s < d.S; ++s) {
              int64_t h = p * d.stride + r * d.dil - d.pad, x = q * d.stride + s * d.dil - d.pad;
              if (h < 0 || h >= d.H || x < 0 || x >= d.W) continue;
              acc += double(in[0][(((n * d.cb() + c / d.ic) * d.H + h) * d.W + x) * d.ic + c % d.ic]) *
                     in[1][((c / d.ic * d.R + r) * d.S + s) * d.ic + c % d.ic];
            }
          int64_t o = (((n * d.cb() + c / d.ic) * d.P + p) * d.Q + q) * d.ic + c % d.ic;
          out[o] = static_cast<float>(epilogue_value(e, acc, bias ? bias[c] : 0.f, residual ? residual[o] : 0.f));
        }
}

struct DepthwiseTensors {
  te::Tensor input, weight, sum, out;  // out is sum when there is no epilogue.
  std::vector<te::Tensor> epilogue_inputs;
};

// Reads outside the input are guarded (zero). There is no padded copy: with one FMA per loaded
// input vector, copying the input cost as much as the convolution (half of oneDNN's speed at
// stride 2), while loop partitioning takes the guards out of the interior rows.
DepthwiseTensors define_depthwise(const Depthwise& d, const ConvEpilogue& e) {
  DepthwiseTensors t;
  t.input = te::placeholder("input", operators::conv_input_shape(d));
  t.weight = te::placeholder("weight", operators::conv_weight_shape(d));
  te::Tensor in = t.input;
  auto read = guarded_read(in, d.H, d.W, d.pad);
  auto rr = te::reduce_axis(d.R, "rr");
  auto rs = te::reduce_axis(d.S, "rs");
  te::Tensor wt = t.weight;
  std::vector<int64_t> shape = operators::conv_output_shape(d);
  t.sum = te::compute(e.any() ? "sum" : "output", shape, [&](const std::vector<Var>& v) {
    Expr h = Expr(v[2]) * d.stride + Expr(rr->var) * d.dil, w = Expr(v[3]) * d.stride + Expr(rs->var) * d.dil;
    return te::sum(read(v[0], v[1], h, w, v[4]) * wt(v[1], rr->var, rs->var, v[4]), {rr, rs});
  }, {"n", "cb", "p", "q", "ci"});
  t.out = epilogue_stage(e, t.sum, shape, t.epilogue_inputs);
  return t;
}

ComputeDef depthwise_compute(const Workload& w) {
  DepthwiseTensors t = define_depthwise(depthwise_of(w), conv_epilogue_of(w));
  return ComputeDef{conv_inputs(t.input, t.weight, t.epilogue_inputs), t.out};
}

ConfigSpace depthwise_space(const std::string& name, const Depthwise& d) {
  ConfigSpace s(name);
  s.define_split_candidates("tile_q", {{1, 2, 4, 7, 8, 14, 16, 28}});
  s.define_knob("unroll_window", std::vector<int64_t>{1, 0});
  s.define_annotate("parallel", {"none", "outer"});
  int64_t b = d.ic;
  s.set_validator([b](const Config& cfg) -> Status {
    int64_t acc = knob_list(cfg, "tile_q")[1] * vectors(b);
    if (acc > kMaxAccVectors)
      return invalid_argument(fmt::format("register tile needs {} vector accumulators (at most {})", acc, kMaxAccVectors));
    return Status();
  });
  return s;
}

Config depthwise_default(const std::string& name, const Depthwise& d, const CpuModel& cpu) {
  Config cfg;
  cfg.template_name = name;
  int64_t block_vectors = (d.ic + cpu.lanes - 1) / cpu.lanes;
  int64_t acc = std::max<int64_t>(1, cpu.vector_registers / 2);
  int64_t most = cpu.vector_registers * kMaxAccVectors / 32;
  const std::vector<int64_t> columns = {1, 2, 4, 7, 8, 14, 16, 28};
  int64_t qr = pick_register_columns(columns, d.Q, block_vectors, acc, most);
  if (qr * block_vectors * 2 <= acc) qr = columns_of_a_long_row(columns, d.Q, block_vectors, acc);
  // The window unrolled around the tile while the body stays a few hundred FMAs: 7 columns of a
  // 40-channel block (3 vectors) times a 5x5 window, 525, ran 2.3x slower inside a model than
  // as a loop (0.0237 against 0.0093 ms), though alone, in kernel_bench, as fast.
  constexpr int64_t kMaxUnrolledWindowFmas = 400;
  bool unroll_window = d.R * d.S <= 25 && qr * block_vectors * d.R * d.S <= kMaxUnrolledWindowFmas;
  cfg.knobs = {{"tile_q", std::vector<int64_t>{-1, qr}},
               {"unroll_window", int64_t{unroll_window ? 1 : 0}},
               {"parallel", std::string("none")}};
  return cfg;
}

StatusOr<Scheduled> depthwise_schedule(const Workload& w, const Config& cfg) {
  Depthwise d = depthwise_of(w);
  int64_t qr = knob_list(cfg, "tile_q")[1];
  bool par = knob_str(cfg, "parallel") == "outer";
  DepthwiseTensors t = define_depthwise(d, conv_epilogue_of(w));
  auto owned = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{t.out});
  schedule::Schedule& s = *owned;
  te::Tensor acc = local_sum(s, t.sum, t.out);
  auto& out = s[t.out];
  te::IterVar n = out.axis(0), cb = out.axis(1), p = out.axis(2), q = out.axis(3), ci = out.axis(4);
  auto [qo, qi] = out.split(q, qr);
  out.reorder({n, cb, p, qo, qi, ci});
  out.vectorize(ci);
  out.unroll(qi);
  // Threads take channel blocks where there are enough to share, else rows, the blocks inside
  // them: a loop fused from blocks and rows computes its row from the fused index, so loop
  // partitioning could no longer peel the padding's rows and every row kept its guards
  // (384@14x14, tile_q 7: 0.019 ms against 0.012 on one thread; 120@14x14 in 3 blocks of 40,
  // 5x5: 0.016 ms against 0.008).
  constexpr int64_t kEnoughBlocks = 8;
  if (par && d.cb() < kEnoughBlocks) out.reorder({n, p, cb, qo, qi, ci});
  if (par) out.parallel(d.cb() >= kEnoughBlocks ? cb : p);
  auto& a = s[acc];
  a.compute_at(out, qo);
  a.reorder({a.axis(0), a.axis(1), a.axis(2), a.reduce_axis(0), a.reduce_axis(1), a.axis(3), a.axis(4)});
  a.vectorize(a.axis(4));
  a.unroll(a.axis(3));
  if (knob_int(cfg, "unroll_window") != 0) {
    a.unroll(a.reduce_axis(0));
    a.unroll(a.reduce_axis(1));
  }
  return Scheduled{std::move(owned), kernel_args(t.input, t.weight, t.epilogue_inputs, t.out)};
}

}  // namespace

std::vector<OpDef> blocked_conv_ops() {
  OpDef op;
  op.name = "conv2d_nchwc";
  // A winograd=m workload's weight is transformed (U): its reference and definition are Winograd's.
  op.reference = [](const Workload& w, const std::vector<const float*>& in, float* out) {
    if (blocked_of(w).winograd > 0) winograd_reference(w, in, out);
    else blocked_reference(w, in, out);
  };
  op.compute = [](const Workload& w) { return blocked_of(w).winograd > 0 ? winograd_compute(w) : blocked_compute(w); };
  std::string cpu = "conv2d_nchwc.cpu.direct";
  op.templates.push_back({cpu, Target::Kind::kLLVM, [cpu](const Workload& w) { return blocked_space(cpu, blocked_of(w)); },
                          [cpu](const Workload& w, const CpuModel& m) { return blocked_default(cpu, blocked_of(w), m); }, blocked_schedule,
                          [](const Workload& w) { return blocked_of(w).winograd == 0; },
                          [cpu](const Workload& w) -> Status {
                            int64_t m = blocked_of(w).winograd;
                            if (m == 0) return Status();
                            return invalid_argument(fmt::format(
                                "{} computes direct convolutions, and {} takes its weight transformed for Winograd's "
                                "F({}x{}, 3x3): its template is conv2d_nchwc.cpu.winograd",
                                cpu, w.to_string(), m, m));
                          }});
  op.templates.push_back(winograd_template());
  OpDef dw;
  dw.name = "depthwise_conv2d_nchwc";
  dw.reference = depthwise_reference;
  dw.compute = depthwise_compute;
  std::string dcpu = "depthwise_conv2d_nchwc.cpu.direct";
  dw.templates.push_back({dcpu, Target::Kind::kLLVM, [dcpu](const Workload& w) { return depthwise_space(dcpu, depthwise_of(w)); },
                          [dcpu](const Workload& w, const CpuModel& m) { return depthwise_default(dcpu, depthwise_of(w), m); }, depthwise_schedule,
                          nullptr, nullptr});
  return {op, dw};
}

}  // namespace tunefarm::ops
