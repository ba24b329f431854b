// Convolutions: conv2d_nchw (weights OIHW [K, C, R, S]), conv2d_nhwc (weights HWIO [R, S, C, K])
// and depthwise_conv2d_nchw (weights [C, 1, R, S]), with stride, padding and dilation.
//
// CPU templates ("direct", NCHWc-style register blocking without changing the user's layouts):
//   - the input is zero-padded once into a scratch tensor so that the inner loops need no bounds
//     checks;
//   - the output is tiled into register tiles kept in a local accumulator (cache_write +
//     compute_at): for NCHW, kr output channels × pr output rows × qr output columns with the
//     columns vectorized (contiguous in NCHW); for NHWC, qr output columns × kr output channels
//     with the channels vectorized (contiguous in NHWC);
//   - the reduction (input channels, kernel rows, kernel columns) runs inside, kernel window
//     unrolled, so each step is a vector load, a few broadcasts and kr·pr·qr/16 FMAs.
// CUDA templates: blocks over (output row, column tile) and channel tiles, threads over columns
// and channels, each thread accumulating kr output channels in registers.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "compiler/ops/op.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::ops {
namespace {

using ir::Expr;
using ir::Var;

using Conv = operators::ConvShape;

Conv conv_of(const Workload& w) { return operators::conv_shape(w); }

void conv_reference(const Workload& w, const std::vector<const float*>& in, float* out) {
  Conv c = conv_of(w);
  const float* x = in[0];
  const float* wt = in[1];
  int64_t cin = c.depthwise ? 1 : c.C;
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t k = 0; k < c.K; ++k)
      for (int64_t p = 0; p < c.P; ++p)
        for (int64_t q = 0; q < c.Q; ++q) {
          double acc = 0.0;
          for (int64_t ci = 0; ci < cin; ++ci) {
            int64_t ch = c.depthwise ? k : ci;
            for (int64_t r = 0; r < c.R; ++r)
              for (int64_t s = 0; s < c.S; ++s) {
                int64_t h = p * c.stride + r * c.dil - c.pad, x_ = q * c.stride + s * c.dil - c.pad;
                if (h < 0 || h >= c.H || x_ < 0 || x_ >= c.W) continue;
                double xv = c.nhwc ? x[((n * c.H + h) * c.W + x_) * c.C + ch] : x[((n * c.C + ch) * c.H + h) * c.W + x_];
                double wv = c.depthwise ? wt[(k * c.R + r) * c.S + s]
                            : c.nhwc   ? wt[((r * c.S + s) * c.C + ci) * c.K + k]
                                       : wt[((k * c.C + ci) * c.R + r) * c.S + s];
                acc += xv * wv;
              }
          }
          int64_t o = c.nhwc ? ((n * c.P + p) * c.Q + q) * c.K + k : ((n * c.K + k) * c.P + p) * c.Q + q;
          out[o] = static_cast<float>(acc);
        }
}

struct ConvTensors {
  te::Tensor input, weight, padded;  // padded is null when reads are guarded inline.
  te::Tensor acc;
  te::IterVar rc, rr, rs;  // rc is null for depthwise.
};

// pad_stage: materialise the zero-padded input (CPU); otherwise reads are guarded by a select.
// With a stride along the vectorized output columns (NCHW), the stage also splits each padded row
// into `stride` phases, padded[n][c][h][phase][j] = input column j * stride + phase, so that the
// columns one vector of outputs reads are contiguous instead of a gather.
ConvTensors define_conv(const Conv& c, bool pad_stage) {
  ConvTensors t;
  t.input = te::placeholder("input", operators::conv_input_shape(c));
  t.weight = te::placeholder("weight", operators::conv_weight_shape(c));
  te::Tensor in = t.input;
  int64_t hp = c.H + 2 * c.pad, wp = c.W + 2 * c.pad;
  bool phased = pad_stage && !c.nhwc && c.stride > 1;
  // The input value at padded coordinates (h, w) of channel ch: zero outside the image (the phase
  // split's last row may reach past the padded width).
  auto guarded = [c, in, phased](Expr n, Expr ch, Expr h, Expr w) -> Expr {
    if (c.pad == 0 && !phased) return c.nhwc ? in(n, h, w, ch) : in(n, ch, h, w);
    Expr hh = h - c.pad, ww = w - c.pad;
    Expr inside = ir::logical_and(ir::logical_and(ir::ge(hh, ir::int_imm(0)), ir::lt(hh, ir::int_imm(c.H))),
                                  ir::logical_and(ir::ge(ww, ir::int_imm(0)), ir::lt(ww, ir::int_imm(c.W))));
    // Clamped coordinates keep the (discarded) load in bounds.
    Expr hc = ir::min(ir::max(hh, ir::int_imm(0)), ir::int_imm(c.H - 1));
    Expr wc = ir::min(ir::max(ww, ir::int_imm(0)), ir::int_imm(c.W - 1));
    return ir::select(inside, c.nhwc ? in(n, hc, wc, ch) : in(n, ch, hc, wc), ir::float_imm(0));
  };
  std::function<Expr(Expr, Expr, Expr, Expr)> read = guarded;
  if (phased) {
    int64_t wq = (wp + c.stride - 1) / c.stride;
    t.padded = te::compute("padded", {c.N, c.C, hp, c.stride, wq}, [&](const std::vector<Var>& v) {
      return guarded(v[0], v[1], v[2], Expr(v[4]) * c.stride + Expr(v[3]));
    }, {"pn", "pc", "ph", "pphase", "pw"});
  } else if (pad_stage && c.pad > 0) {
    std::vector<int64_t> shape = c.nhwc ? std::vector<int64_t>{c.N, hp, wp, c.C} : std::vector<int64_t>{c.N, c.C, hp, wp};
    std::vector<std::string> names = c.nhwc ? std::vector<std::string>{"pn", "ph", "pw", "pc"}
                                            : std::vector<std::string>{"pn", "pc", "ph", "pw"};
    t.padded = te::compute("padded", shape, [&](const std::vector<Var>& v) {
      return c.nhwc ? guarded(v[0], v[3], v[1], v[2]) : guarded(v[0], v[1], v[2], v[3]);
    }, names);
    te::Tensor pd = t.padded;
    read = [c, pd](Expr n, Expr ch, Expr h, Expr w) -> Expr { return c.nhwc ? pd(n, h, w, ch) : pd(n, ch, h, w); };
  }
  if (!c.depthwise) t.rc = te::reduce_axis(c.C, "rc");
  t.rr = te::reduce_axis(c.R, "rr");
  t.rs = te::reduce_axis(c.S, "rs");
  te::Tensor wt = t.weight;
  Var rc = t.rc ? t.rc->var : nullptr, rr = t.rr->var, rs = t.rs->var;
  std::vector<te::IterVar> raxes = c.depthwise ? std::vector<te::IterVar>{t.rr, t.rs} : std::vector<te::IterVar>{t.rc, t.rr, t.rs};
  std::vector<std::string> names = c.nhwc ? std::vector<std::string>{"n", "p", "q", "k"} : std::vector<std::string>{"n", "k", "p", "q"};
  t.acc = te::compute("output", operators::conv_output_shape(c), [&](const std::vector<Var>& v) {
    Expr n = v[0];
    Expr k = c.nhwc ? v[3] : v[1];
    Expr p = c.nhwc ? v[1] : v[2];
    Expr q = c.nhwc ? v[2] : v[3];
    Expr h = p * c.stride + Expr(rr) * c.dil, w = q * c.stride + Expr(rs) * c.dil;
    Expr ch = c.depthwise ? k : Expr(rc);
    Expr x, wv;
    if (phased) {
      // Column q * stride + rs * dil lies in phase (rs * dil) % stride at q + (rs * dil) / stride.
      Expr off = Expr(rs) * c.dil;
      x = t.padded(n, ch, h, off % c.stride, q + off / c.stride);
    } else {
      x = read(n, ch, h, w);
    }
    if (c.depthwise) {
      wv = wt(k, ir::int_imm(0), rr, rs);
    } else {
      wv = c.nhwc ? wt(rr, rs, rc, k) : wt(k, rc, rr, rs);
    }
    return te::sum(x * wv, raxes);
  }, names);
  return t;
}

ComputeDef conv_compute(const Workload& w) {
  ConvTensors t = define_conv(conv_of(w), false);
  return ComputeDef{{t.input, t.weight}, t.acc};
}

// ---- CPU template ----

// Vector accumulators a register tile may use.
constexpr int64_t kMaxAccVectors = 28;

int64_t vectors(int64_t lanes) { return (lanes + 15) / 16; }

ConfigSpace cpu_space(const std::string& name, const Conv& c) {
  ConfigSpace s(name);
  if (c.nhwc) {
    s.define_split_candidates("tile_q", {{1, 2, 3, 4, 6, 7, 8, 12, 14}});
    s.define_split_candidates("tile_k", {{8, 16, 32, 48, 64}});
  } else {
    s.define_split_candidates("tile_k", {{1, 2, 4, 6, 8, 12, 16}});
    s.define_split_candidates("tile_q", {{4, 8, 14, 16, 28, 32, 56}});
  }
  s.define_split_candidates("tile_p", {{1, 2, 4}});
  // Orders of the reduction (channel, window row, window column) and of the tile loops
  // (NCHW: channel, row, column tiles; NHWC: row, column, channel tiles): which operand stays in
  // cache while the other streams. The first choice of each is the order the template had before
  // the knob existed.
  const std::vector<std::vector<int64_t>> orders = {{0, 1, 2}, {1, 2, 0}, {0, 2, 1}, {1, 0, 2}, {2, 0, 1}, {2, 1, 0}};
  // A depthwise window has no channel loop and keeps its one order; the knob stays with the two
  // choices it always had there, so that recorded configs still read.
  s.define_reorder("reduce_order", c.depthwise ? std::vector<std::vector<int64_t>>(orders.begin(), orders.begin() + 2)
                                               : orders);
  s.define_knob("unroll_window", std::vector<int64_t>{1, 0});
  s.define_annotate("parallel", {"none", "outer"});
  s.define_reorder("tile_order", orders);
  bool nhwc = c.nhwc, depthwise = c.depthwise;
  s.set_validator([nhwc, depthwise](const Config& cfg) -> Status {
    int64_t kr = knob_list(cfg, "tile_k")[1], qr = knob_list(cfg, "tile_q")[1], pr = knob_list(cfg, "tile_p")[1];
    int64_t acc = nhwc ? qr * pr * vectors(kr) : kr * pr * vectors(qr);
    if (acc > kMaxAccVectors)
      return invalid_argument(fmt::format("register tile needs {} vector accumulators (at most {})", acc, kMaxAccVectors));
    if (depthwise && kr != 1) return invalid_argument("depthwise convolutions tile channels by 1");
    return Status();
  });
  return s;
}

Config cpu_default(const std::string& name, const Conv& c) {
  Config cfg;
  cfg.template_name = name;
  int64_t kr, qr;
  if (c.nhwc) {
    kr = pick_tile({8, 16, 32, 48, 64}, c.K, 32);
    qr = pick_tile({1, 2, 3, 4, 6, 7, 8, 12, 14}, c.Q, 24 / vectors(kr));
  } else if (c.depthwise) {
    // Few reduction steps per output: wide tiles amortise the loop and the window loads.
    kr = 1;
    qr = pick_tile({4, 8, 14, 16, 28, 32, 56}, c.Q, 64);
  } else {
    // One full vector of output columns by up to 16 output channels (measured on the 56x56x64
    // layer: 16x16 beats 8x28, whose 28 lanes split into 16+8+4).
    qr = c.Q >= 16 ? 16 : pick_tile({4, 8, 14, 16}, c.Q, 16);
    kr = pick_tile({1, 2, 4, 6, 8, 12, 16}, c.K, 24 / vectors(qr));
  }
  // A large window unrolled around the register tile overflows the instruction cache (7x7
  // stride-2 first layer, 3 channels: 69 GFLOP/s unrolled, 166 rolled with the channel loop
  // innermost); small windows unroll well.
  bool unroll_window = c.R * c.S <= 9;
  cfg.knobs = {{"tile_k", std::vector<int64_t>{-1, kr}},
               {"tile_q", std::vector<int64_t>{-1, qr}},
               {"tile_p", std::vector<int64_t>{-1, c.depthwise ? 2 : 1}},
               {"reduce_order", unroll_window ? std::vector<int64_t>{0, 1, 2} : std::vector<int64_t>{1, 2, 0}},
               {"unroll_window", int64_t{unroll_window ? 1 : 0}},
               {"parallel", std::string("none")},
               {"tile_order", std::vector<int64_t>{0, 1, 2}}};
  return cfg;
}

StatusOr<Scheduled> cpu_schedule(const Workload& w, const Config& cfg) {
  Conv c = conv_of(w);
  int64_t kr = knob_list(cfg, "tile_k")[1], qr = knob_list(cfg, "tile_q")[1], pr = knob_list(cfg, "tile_p")[1];
  const auto& rorder = knob_list(cfg, "reduce_order");
  const auto& torder = knob_list(cfg, "tile_order");
  bool unroll_window = knob_int(cfg, "unroll_window") != 0;
  bool par = knob_str(cfg, "parallel") == "outer";
  ConvTensors t = define_conv(c, true);
  auto owned = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{t.acc});
  schedule::Schedule& s = *owned;
  te::Tensor acc = s.cache_write(t.acc, ir::MemScope::kLocal);
  auto& out = s[t.acc];
  te::IterVar n = out.axis(0);
  te::IterVar k = out.axis(c.nhwc ? 3 : 1), p = out.axis(c.nhwc ? 1 : 2), q = out.axis(c.nhwc ? 2 : 3);
  auto [ko, ki] = out.split(k, kr);
  auto [po, pi] = out.split(p, pr);
  auto [qo, qi] = out.split(q, qr);
  // Tile loops outside in the chosen order, the register tile inside: channels x rows x columns
  // (NCHW) or rows x columns x channels (NHWC), the contiguous axis innermost and vectorized.
  std::vector<te::IterVar> tile_loops = c.nhwc ? std::vector<te::IterVar>{po, qo, ko} : std::vector<te::IterVar>{ko, po, qo};
  std::vector<te::IterVar> loops = {n};
  for (int64_t i : torder) loops.push_back(tile_loops[i]);
  te::IterVar outermost = loops[1], attach = loops.back();
  std::vector<te::IterVar> register_tile = c.nhwc ? std::vector<te::IterVar>{pi, qi, ki} : std::vector<te::IterVar>{ki, pi, qi};
  loops.insert(loops.end(), register_tile.begin(), register_tile.end());
  out.reorder(loops);
  out.unroll(c.nhwc ? qi : ki);
  out.vectorize(register_tile.back());
  out.unroll(pi);
  if (par) out.parallel(outermost);

  auto& a = s[acc];
  a.compute_at(out, attach);
  te::IterVar an = a.axis(0);
  te::IterVar ak = a.axis(c.nhwc ? 3 : 1), ap = a.axis(c.nhwc ? 1 : 2), aq = a.axis(c.nhwc ? 2 : 3);
  std::vector<te::IterVar> red;
  for (size_t i = 0; i < a.op()->reduce_axes.size(); ++i) red.push_back(a.reduce_axis(i));
  std::vector<te::IterVar> order = {an};
  if (red.size() == 3) {
    for (int64_t i : rorder) order.push_back(red[i]);
  } else {
    order.insert(order.end(), red.begin(), red.end());
  }
  if (c.nhwc) {
    for (auto iv : {ap, aq, ak}) order.push_back(iv);
    a.unroll(aq);
    a.vectorize(ak);
  } else {
    for (auto iv : {ak, ap, aq}) order.push_back(iv);
    a.unroll(ak);
    a.vectorize(aq);
  }
  a.unroll(ap);
  a.reorder(order);
  if (unroll_window) {
    a.unroll(red[red.size() - 2]);
    a.unroll(red[red.size() - 1]);
  }
  if (t.padded.op) {
    auto& pd = s[t.padded];
    pd.vectorize(pd.op()->axes.back());
    if (par) pd.parallel(pd.axis(1));
  }
  return Scheduled{std::move(owned), {t.input, t.weight, t.acc}};
}

// ---- CUDA template ----

ConfigSpace cuda_space(const std::string& name, const Conv& c) {
  ConfigSpace s(name);
  s.define_split_candidates("tile_k", {{1, 2, 4, 8}, {1, 2, 4, 8}});
  s.define_split_candidates("tile_q", {{8, 16, 32, 64}});
  s.define_knob("unroll_window", std::vector<int64_t>{1, 0});
  bool depthwise = c.depthwise;
  s.set_validator([depthwise](const Config& cfg) -> Status {
    int64_t threads = knob_list(cfg, "tile_k")[1] * knob_list(cfg, "tile_q")[1];
    if (threads < 32 || threads > 1024) return invalid_argument(fmt::format("{} threads per block (32..1024)", threads));
    if (depthwise && knob_list(cfg, "tile_k")[2] != 1) return invalid_argument("depthwise convolutions tile channels by 1");
    return Status();
  });
  return s;
}

Config cuda_default(const std::string& name, const Conv& c) {
  Config cfg;
  cfg.template_name = name;
  cfg.knobs = {{"tile_k", std::vector<int64_t>{-1, 4, c.depthwise ? 1 : 4}},
               {"tile_q", std::vector<int64_t>{-1, c.Q >= 32 ? 32 : 16}},
               {"unroll_window", int64_t{1}}};
  return cfg;
}

StatusOr<Scheduled> cuda_schedule(const Workload& w, const Config& cfg) {
  Conv c = conv_of(w);
  int64_t kt = knob_list(cfg, "tile_k")[1], kr = knob_list(cfg, "tile_k")[2], qt = knob_list(cfg, "tile_q")[1];
  ConvTensors t = define_conv(c, false);
  auto owned = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{t.acc});
  schedule::Schedule& s = *owned;
  te::Tensor acc = s.cache_write(t.acc, ir::MemScope::kLocal);
  auto& out = s[t.acc];
  te::IterVar n = out.axis(0);
  te::IterVar k = out.axis(c.nhwc ? 3 : 1), p = out.axis(c.nhwc ? 1 : 2), q = out.axis(c.nhwc ? 2 : 3);
  auto [qo, qi] = out.split(q, qt);
  auto [k1, kin] = out.split(k, kr);
  auto [ko, kth] = out.split(k1, kt);
  out.reorder({n, ko, p, qo, kth, qi, kin});
  te::IterVar pq = out.fuse(p, qo);
  out.bind(n, "blockIdx.z");
  out.bind(ko, "blockIdx.y");
  out.bind(pq, "blockIdx.x");
  out.bind(kth, "threadIdx.y");
  out.bind(qi, "threadIdx.x");
  out.unroll(kin);
  auto& a = s[acc];
  a.compute_at(out, qi);
  std::vector<te::IterVar> order;
  for (size_t i = 0; i < a.op()->reduce_axes.size(); ++i) order.push_back(a.reduce_axis(i));
  te::IterVar ak = a.axis(c.nhwc ? 3 : 1);
  order.push_back(ak);
  a.reorder(order);
  a.unroll(ak);
  if (knob_int(cfg, "unroll_window") != 0) {
    a.unroll(order[order.size() - 3]);
    a.unroll(order[order.size() - 2]);
  }
  return Scheduled{std::move(owned), {t.input, t.weight, t.acc}};
}

OpDef conv_op(const std::string& name) {
  OpDef op;
  op.name = name;
  op.reference = conv_reference;
  op.compute = conv_compute;
  std::string cpu = name + ".cpu.direct", cuda = name + ".cuda.direct";
  op.templates.push_back({cpu, Target::Kind::kLLVM, [cpu](const Workload& w) { return cpu_space(cpu, conv_of(w)); },
                          [cpu](const Workload& w, const CpuModel&) { return cpu_default(cpu, conv_of(w)); }, cpu_schedule, nullptr, nullptr});
  op.templates.push_back({cuda, Target::Kind::kCUDA, [cuda](const Workload& w) { return cuda_space(cuda, conv_of(w)); },
                          [cuda](const Workload& w, const CpuModel&) { return cuda_default(cuda, conv_of(w)); }, cuda_schedule, nullptr, nullptr});
  return op;
}

}  // namespace

std::vector<OpDef> conv_ops() {
  return {conv_op("conv2d_nchw"), conv_op("conv2d_nhwc"), conv_op("depthwise_conv2d_nchw")};
}

}  // namespace tunefarm::ops
