// conv2d_nchwc with winograd=m: a 3x3 stride-1 convolution as Winograd's F(m x m, 3x3)
// (common/operators/winograd.h), its weight arriving transformed as U [alpha, alpha, K/oc, C, oc].
//
// The stages (TVM's conv2d_winograd for x86 and oneDNN's wino convolution are the models):
//   rows  [N, TP, TQ, C/ic, alpha, alpha, ic]  B^T d: the first 1-D pass over each input tile
//   V     [alpha, alpha, N, TP, TQ, C/ic, ic]  (B^T d) B: the second, in the layout the GEMM reads
//   M     [alpha, alpha, N, K/oc, TP*TQ, oc]   a GEMM per (e, nu): M = V U, summed over C
//   cols  [N, K/oc, TP, TQ, alpha, m, oc]      M A: the first 1-D pass of the output transform
//   out   [N, K/oc, P, Q, oc]                  A^T (M A), then the epilogue; only the P x Q valid
//                                              outputs of the last tiles
// The transforms are sums written out term by term, their coefficients select chains over the
// transform's index: once that index's loop is unrolled the chains fold to literals, the products
// with zero drop out, and what remains is the matrices' few nonzero terms as constant multiplies.
// Each 2-D transform is two 1-D passes (2 * alpha^3 terms instead of alpha^4, and small unrolled
// bodies). The GEMM is the time: vectors of oc output channels, one broadcast of V per tile of
// the register tile (tiles x output-channel blocks), like the direct template's columns x blocks.
// V and M are computed a block of rows of tiles at a time, before the output transform of the
// block's tiles (block_rows), and the input is read through guards or from a zero-padded copy
// (pad_stage).
#include <algorithm>
#include <functional>
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "common/operators/winograd.h"
#include "compiler/ops/conv_nchwc.h"
#include "compiler/ops/op.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::ops {
namespace {

using ir::Expr;
using ir::Var;
using operators::ConvEpilogue;
using operators::ConvShape;
using operators::WinogradMatrices;

// A constant matrix [rows, cols] (row-major) read at row `i`, a loop variable, and column `j`: a
// select chain over i that folds to the literal once i is an unrolled constant. Null where the
// whole column is zero (the term drops out of every row).
Expr coefficient(const std::vector<double>& matrix, int64_t rows, int64_t cols, const Expr& i, int64_t j) {
  auto at = [&](int64_t r) { return matrix[static_cast<size_t>(r * cols + j)]; };
  bool zero = true;
  for (int64_t r = 0; r < rows; ++r) zero = zero && at(r) == 0.0;
  if (zero) return nullptr;
  Expr c = ir::float_imm(at(rows - 1));
  for (int64_t r = rows - 2; r >= 0; --r)
    if (at(r) != at(r + 1) || !c->as<ir::FloatImm>())
      c = ir::select(ir::compare(ir::CompareOp::kEQ, i, ir::int_imm(r)), ir::float_imm(at(r)), c);
  return c;
}

// sum over j < n of matrix[i][j] * term(j), the terms of zero columns left out.
Expr transform_row(const std::vector<double>& matrix, int64_t rows, int64_t n, const Expr& i,
                   const std::function<Expr(int64_t)>& term) {
  Expr sum;
  for (int64_t j = 0; j < n; ++j) {
    Expr c = coefficient(matrix, rows, n, i, j);
    if (!c) continue;
    Expr t = c * term(j);
    sum = sum ? sum + t : t;
  }
  return sum ? sum : ir::float_imm(0);
}

struct WinogradTensors {
  te::Tensor input, weight, padded, rows, v, m, cols, sum, out;  // out is sum when there is no epilogue.
  std::vector<te::Tensor> epilogue_inputs;
};

// Whether the tiles read outside the input: its padding, or past its last row or column where the
// last tiles reach beyond it (even without padding).
bool reads_outside(const ConvShape& c) {
  return c.pad > 0 || c.tiles_p() * c.winograd + 2 - c.pad > c.H || c.tiles_q() * c.winograd + 2 - c.pad > c.W;
}

// `pad_stage`: the input zero-padded to whole tiles as a stage of its own, which the input
// transform reads without guards; otherwise its reads are guarded (the naive reference).
WinogradTensors define_winograd(const ConvShape& c, bool pad_stage) {
  const WinogradMatrices& t = operators::winograd_matrices(c.winograd);
  const int64_t a = t.alpha, m = t.m, tp = c.tiles_p(), tq = c.tiles_q();
  WinogradTensors w;
  w.input = te::placeholder("input", operators::conv_input_shape(c));
  w.weight = te::placeholder("weight", operators::conv_weight_shape(c));
  Read5 read = guarded_read(w.input, c.H, c.W, c.pad, reads_outside(c));
  if (pad_stage && reads_outside(c)) {
    w.padded = te::compute("padded", {c.N, c.cb(), tp * m + 2, tq * m + 2, c.ic},
                           [&](const std::vector<Var>& v) { return read(v[0], v[1], v[2], v[3], v[4]); },
                           {"pn", "pc", "ph", "pw", "pci"});
    te::Tensor pd = w.padded;
    read = [pd](Expr n, Expr cb, Expr h, Expr x, Expr ci) -> Expr { return pd(n, cb, h, x, ci); };
  }
  w.rows = te::compute("wino_rows", {c.N, tp, tq, c.cb(), a, a, c.ic}, [&](const std::vector<Var>& v) {
    return transform_row(t.bt, a, a, v[4], [&](int64_t r) {
      return read(v[0], v[3], Expr(v[1]) * m + r, Expr(v[2]) * m + v[5], v[6]);
    });
  }, {"n", "tp", "tq", "cb", "e", "s", "ci"});
  te::Tensor rows = w.rows;
  w.v = te::compute("wino_v", {a, a, c.N, tp, tq, c.cb(), c.ic}, [&](const std::vector<Var>& v) {
    return transform_row(t.bt, a, a, v[1], [&](int64_t s) { return rows(v[2], v[3], v[4], v[5], v[0], ir::int_imm(s), v[6]); });
  }, {"e", "nu", "n", "tp", "tq", "cb", "ci"});
  te::Tensor vt = w.v, u = w.weight;
  auto rcb = te::reduce_axis(c.cb(), "rcb");
  auto rci = te::reduce_axis(c.ic, "rci");
  w.m = te::compute("wino_m", {a, a, c.N, c.kb(), tp * tq, c.oc}, [&](const std::vector<Var>& v) {
    Expr tile = v[4];
    Expr x = vt(v[0], v[1], v[2], tile / tq, tile % tq, rcb->var, rci->var);
    return te::sum(x * u(v[0], v[1], v[3], Expr(rcb->var) * c.ic + rci->var, v[5]), {rcb, rci});
  }, {"e", "nu", "n", "kb", "t", "ko"});
  te::Tensor mt = w.m;
  w.cols = te::compute("wino_cols", {c.N, c.kb(), tp, tq, a, m, c.oc}, [&](const std::vector<Var>& v) {
    return transform_row(t.at, m, a, v[5], [&](int64_t nu) {
      return mt(v[4], ir::int_imm(nu), v[0], v[1], Expr(v[2]) * tq + v[3], v[6]);
    });
  }, {"n", "kb", "tp", "tq", "e", "j", "ko"});
  te::Tensor cols = w.cols;
  std::vector<int64_t> shape = operators::conv_output_shape(c);
  w.sum = te::compute(c.epilogue.any() ? "sum" : "output", shape, [&](const std::vector<Var>& v) {
    Expr p = v[2], q = v[3];
    return transform_row(t.at, m, a, p % m, [&](int64_t e) {
      return cols(v[0], v[1], p / m, q / m, ir::int_imm(e), q % m, v[4]);
    });
  }, {"n", "kb", "p", "q", "ko"});
  w.out = epilogue_stage(c.epilogue, w.sum, shape, w.epilogue_inputs);
  return w;
}

// What a block's V and M may take of the stack (of a thread's 8 MiB; beyond it, whole tensors in
// the workspace).
constexpr int64_t kMaxBlockBytes = 1024 * 1024;

const std::vector<int64_t>& tile_candidates() {
  static const std::vector<int64_t> kTiles = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16};
  return kTiles;
}

// The bytes of V and M for a block of `rows` rows of tiles (on the stack when blocked).
int64_t block_bytes(const ConvShape& c, int64_t rows) {
  return c.alpha() * c.alpha() * rows * c.tiles_q() * (c.C + c.K) * 4;
}

ConfigSpace winograd_space(const std::string& name, const ConvShape& c) {
  ConfigSpace s(name);
  // The GEMM's register tile: tiles (of one image, in row-major order) x output-channel blocks.
  s.define_split_candidates("tile_t", {tile_candidates()});
  s.define_split_candidates("tile_kb", {{1, 2, 3, 4}});
  // Input channels of a block per step of the GEMM's reduction loop, unrolled.
  s.define_knob("unroll_c", std::vector<int64_t>{1, 2, 4});
  // Rows of tiles whose GEMMs and input transform are computed together, before the output
  // transform of their tiles (V and M then stay in the caches, on the stack); 0: all of them, V and
  // M whole tensors in the workspace (whose fresh pages every call faults in).
  s.define_knob("block_rows", std::vector<int64_t>{1, 2, 4, 8, 0});
  // 1: the input zero-padded to whole tiles as a stage of its own (a copy of the input); 0: the
  // input transform reads it through guards, which loop partitioning takes out of the inner tiles
  // by copying the loops around them, the GEMMs with them: kernels 2-8% faster (no copy) that
  // compile in 2-3x the time, too long for F(4x4) (64@40x40: median 189 ms a candidate, 64 ms
  // with the copy; F(2x2) 65 and 39 ms).
  s.define_knob("pad_stage", std::vector<int64_t>{1, 0});
  s.define_annotate("parallel", {"none", "outer"});
  s.set_validator([c](const Config& cfg) -> Status {
    int64_t acc = knob_list(cfg, "tile_t")[1] * knob_list(cfg, "tile_kb")[1] * vectors(c.oc);
    if (acc > kMaxAccVectors)
      return invalid_argument(fmt::format("register tile needs {} vector accumulators (at most {})", acc, kMaxAccVectors));
    int64_t unroll = knob_int(cfg, "unroll_c");
    if (c.ic % unroll != 0)
      return invalid_argument(fmt::format("unroll_c={} does not divide the input block of {} channels", unroll, c.ic));
    if (acc * unroll > kMaxUnrolledFmas)
      return invalid_argument(fmt::format("unrolled loop body of {} FMAs (at most {})", acc * unroll, kMaxUnrolledFmas));
    bool pad_stage = knob_int(cfg, "pad_stage") != 0;
    if (pad_stage && !reads_outside(c))
      return invalid_argument("pad_stage=1: the tiles read nothing outside the input (the kernel of pad_stage=0)");
    if (!pad_stage && reads_outside(c) && c.winograd == 4)
      return invalid_argument("pad_stage=0: F(4x4)'s guarded input transform, its border tiles peeled with the GEMMs "
                              "around them, compiles in about 190 ms (at most ~100); pad_stage=1 pads a copy instead");
    int64_t rows = knob_int(cfg, "block_rows");
    if (rows > 1 && rows / 2 >= c.tiles_p())
      return invalid_argument(fmt::format("block_rows={}: the {} rows of tiles are one block of {} already", rows,
                                          c.tiles_p(), rows / 2));
    if (rows > 0 && block_bytes(c, rows) > kMaxBlockBytes)
      return invalid_argument(fmt::format("block_rows={}: V and M of a block take {} KiB of stack (at most {})", rows,
                                          block_bytes(c, rows) / 1024, kMaxBlockBytes / 1024));
    return Status();
  });
  return s;
}

// Past this size the transformed weight U does not stay in the caches between blocks of rows (32
// MiB of L3 on a Zen 4 core complex, shared): 512@7x7 F(4x4), U 37.7 MiB, 3.55 ms in blocks of one
// row of 2 tiles, 1.95 ms in one block; F(2x2), 16.8 MiB, 2.33 -> 1.70 ms; but 256@10x10 F(4x4),
// 9.4 MiB, 0.51 ms in rows of 3 tiles and 0.71 in one block.
constexpr int64_t kStreamedWeightBytes = 12 * 1024 * 1024;

Config winograd_default(const std::string& name, const ConvShape& c, const CpuModel& cpu) {
  // One row of tiles a block unless U streams from memory (above) or the row is too large for the
  // stack (more rows were no faster where measured: 256@10x10 above). The register
  // tile: tiles that divide the block's (a partial tile runs as variable-extent loops, 2-3x
  // slower), output-channel blocks that divide the channels, and the most accumulators up to 24
  // that leave a register for each weight vector and two for the broadcasts (28 were 1.5-3x
  // slower: 64@56x56 F(2x2) 14 tiles x 2 blocks 3.8 ms, 4 x 4 1.1 ms); of equal ones the
  // squarer, which loads fewer vectors per FMA. The input read through guards where the space
  // allows it (pad_stage).
  int64_t oc_vectors = (c.oc + cpu.lanes - 1) / cpu.lanes;
  int64_t rows = 1;
  if (c.alpha() * c.alpha() * c.C * c.K * 4 > kStreamedWeightBytes) {
    // Every block streams all of U from memory: all the rows in one block where it fits.
    int64_t all = 1;
    while (all < c.tiles_p()) all *= 2;
    if (all <= 8 && block_bytes(c, all) <= kMaxBlockBytes) rows = all;
  }
  while (rows < 8 && block_bytes(c, rows) > kMaxBlockBytes) rows *= 2;
  if (block_bytes(c, rows) > kMaxBlockBytes) rows = 0;
  int64_t tiles = (rows > 0 ? std::min(rows, c.tiles_p()) : c.tiles_p()) * c.tiles_q();
  int64_t most = std::min<int64_t>(24 * cpu.vector_registers / 32, cpu.vector_registers);
  int64_t best_t = 1, best_kb = 1;
  for (int64_t kb : {4, 3, 2, 1}) {
    if (c.kb() % kb != 0) continue;
    int64_t budget = std::min(most, cpu.vector_registers - kb * oc_vectors - 2) / (kb * oc_vectors);
    for (int64_t tt : tile_candidates()) {
      if (tt > budget || tiles % tt != 0) continue;
      bool more = tt * kb > best_t * best_kb;
      bool squarer = tt * kb == best_t * best_kb && tt + kb < best_t + best_kb;
      if (more || squarer) best_t = tt, best_kb = kb;
    }
  }
  Config cfg;
  cfg.template_name = name;
  cfg.knobs = {{"tile_t", std::vector<int64_t>{-1, best_t}},
               {"tile_kb", std::vector<int64_t>{-1, best_kb}},
               {"unroll_c", int64_t{c.ic % 2 == 0 ? 2 : 1}},
               {"block_rows", rows},
               {"pad_stage", int64_t{reads_outside(c) && c.winograd == 4 ? 1 : 0}},
               {"parallel", std::string("none")}};
  return cfg;
}

// A transform's stage computed at `iv` of `at`, one tile in registers: its two axes inside the
// tile (the transform's indices, whose coefficients' select chains then fold) unrolled, the
// channels' lanes a vector.
void in_registers(schedule::Stage& st, schedule::Stage& at, const te::IterVar& iv) {
  size_t n = st.op()->axes.size();
  st.set_scope(ir::MemScope::kLocal);
  st.compute_at(at, iv);
  st.unroll(st.axis(n - 3));
  st.unroll(st.axis(n - 2));
  st.vectorize(st.axis(n - 1));
}

StatusOr<Scheduled> winograd_schedule(const Workload& wl, const Config& cfg) {
  ConvShape c = operators::conv_shape(wl);
  const int64_t m = c.winograd;
  int64_t tt = knob_list(cfg, "tile_t")[1], tk = knob_list(cfg, "tile_kb")[1];
  int64_t unroll = knob_int(cfg, "unroll_c"), block = knob_int(cfg, "block_rows");
  bool par = knob_str(cfg, "parallel") == "outer";
  WinogradTensors w = define_winograd(c, knob_int(cfg, "pad_stage") != 0);
  auto owned = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{w.out});
  schedule::Schedule& s = *owned;

  // The output transform, a tile at a time, the first pass's alpha x m vectors beside it; rows of
  // tiles in blocks, each block's GEMMs (and their input transform) computed before its tiles.
  auto& out = s[w.out];
  auto [po, pi] = out.split(out.axis(2), m);
  auto [qo, qi] = out.split(out.axis(3), m);
  te::IterVar pob, poi;
  // Few blocks (a small map in blocks of several rows: 13x13 in one block of 4) leave a parallel
  // loop over blocks nothing to share: the threads split each block's stages instead (the GEMMs
  // over (e, nu), the input transform over rows, the output transform over channel blocks), one
  // launch each per block. On one thread the same code runs.
  constexpr int64_t kFewBlocks = 4;
  bool inside = par && block > 0 && (c.tiles_p() + block - 1) / block < kFewBlocks;
  // The GEMMs and the input transform share the threads themselves: all of them at once, or
  // inside each block.
  bool stages_parallel = (par && block == 0) || inside;
  if (block > 0) {
    std::tie(pob, poi) = out.split(po, block);
    if (inside) out.reorder({out.axis(0), pob, out.axis(1), poi, qo, pi, qi, out.axis(4)});
    else out.reorder({out.axis(0), pob, poi, out.axis(1), qo, pi, qi, out.axis(4)});
  } else {
    out.reorder({out.axis(0), po, out.axis(1), qo, pi, qi, out.axis(4)});
  }
  out.unroll(pi);
  out.unroll(qi);
  out.vectorize(out.axis(4));
  if (inside) out.parallel(out.axis(1));
  else if (par) out.parallel(block > 0 ? pob : po);
  if (w.sum.op != w.out.op) in_registers(s[w.sum], out, qo);
  in_registers(s[w.cols], out, qo);

  // The GEMMs, one (e, nu) at a time over the block's tiles: the register tile of sums computed at
  // each tile of M.
  te::Tensor acc = s.cache_write(w.m, ir::MemScope::kLocal);
  auto& mm = s[w.m];
  auto [kbo, kbi] = mm.split(mm.axis(3), tk);
  auto [to, ti] = mm.split(mm.axis(4), tt);
  mm.reorder({mm.axis(2), mm.axis(0), mm.axis(1), kbo, to, kbi, ti, mm.axis(5)});
  mm.unroll(kbi);
  mm.unroll(ti);
  mm.vectorize(mm.axis(5));
  if (block > 0) mm.compute_at(out, pob);
  if (stages_parallel) mm.parallel(mm.fuse(mm.axis(0), mm.axis(1)));
  auto& a = s[acc];
  a.compute_at(mm, to);
  auto [rco, rcu] = a.split(a.reduce_axis(1), unroll);
  a.reorder({a.axis(0), a.axis(1), a.axis(2), a.reduce_axis(0), rco, rcu, a.axis(3), a.axis(4), a.axis(5)});
  a.unroll(rcu);
  a.unroll(a.axis(3));
  a.unroll(a.axis(4));
  a.vectorize(a.axis(5));

  // The input transform, a tile and a block of input channels at a time, the first pass's
  // alpha x alpha vectors beside it: the block's tiles before its GEMMs, or all of them.
  auto& v = s[w.v];
  v.reorder({v.axis(2), v.axis(3), v.axis(4), v.axis(5), v.axis(0), v.axis(1), v.axis(6)});
  v.unroll(v.axis(0));
  v.unroll(v.axis(1));
  v.vectorize(v.axis(6));
  if (block > 0) v.compute_at(mm, mm.axis(2));
  if (stages_parallel) v.parallel(v.axis(3));
  in_registers(s[w.rows], v, v.axis(5));
  if (w.padded.op) {
    auto& pd = s[w.padded];
    pd.vectorize(pd.axis(4));
    if (par) pd.parallel(pd.axis(1));
  }
  return Scheduled{std::move(owned), kernel_args(w.input, w.weight, w.epilogue_inputs, w.out)};
}

}  // namespace

void winograd_reference(const Workload& wl, const std::vector<const float*>& in, float* out) {
  ConvShape c = operators::conv_shape(wl);
  const WinogradMatrices& t = operators::winograd_matrices(c.winograd);
  const int64_t a = t.alpha, m = t.m, tp = c.tiles_p(), tq = c.tiles_q(), aa = a * a;
  const float* x = in[0];
  const float* u = in[1];
  ConvEpilogue e = c.epilogue;
  const float* bias = e.bias ? in[2] : nullptr;
  const float* residual = e.residual ? in[e.bias ? 3 : 2] : nullptr;
  std::vector<double> d(static_cast<size_t>(aa)), bd(static_cast<size_t>(aa));
  std::vector<double> v(static_cast<size_t>(c.C * aa));  // one tile's V [C][alpha * alpha]
  std::vector<double> mk(static_cast<size_t>(aa)), am(static_cast<size_t>(m * a));
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t ty = 0; ty < tp; ++ty)
      for (int64_t tx = 0; tx < tq; ++tx) {
        for (int64_t ch = 0; ch < c.C; ++ch) {
          for (int64_t r = 0; r < a; ++r)
            for (int64_t s = 0; s < a; ++s) {
              int64_t h = ty * m + r - c.pad, w = tx * m + s - c.pad;
              bool inside = h >= 0 && h < c.H && w >= 0 && w < c.W;
              d[static_cast<size_t>(r * a + s)] =
                  inside ? x[(((n * c.cb() + ch / c.ic) * c.H + h) * c.W + w) * c.ic + ch % c.ic] : 0.0;
            }
          for (int64_t i = 0; i < a; ++i)  // B^T d
            for (int64_t s = 0; s < a; ++s) {
              double sum = 0;
              for (int64_t r = 0; r < a; ++r) sum += t.BT(i, r) * d[static_cast<size_t>(r * a + s)];
              bd[static_cast<size_t>(i * a + s)] = sum;
            }
          for (int64_t i = 0; i < a; ++i)  // (B^T d) B
            for (int64_t j = 0; j < a; ++j) {
              double sum = 0;
              for (int64_t s = 0; s < a; ++s) sum += bd[static_cast<size_t>(i * a + s)] * t.BT(j, s);
              v[static_cast<size_t>(ch * aa + i * a + j)] = sum;
            }
        }
        for (int64_t k = 0; k < c.K; ++k) {
          for (int64_t en = 0; en < aa; ++en) {  // U (.) V summed over the channels
            double sum = 0;
            for (int64_t ch = 0; ch < c.C; ++ch)
              sum += double(u[((en * c.kb() + k / c.oc) * c.C + ch) * c.oc + k % c.oc]) * v[static_cast<size_t>(ch * aa + en)];
            mk[static_cast<size_t>(en)] = sum;
          }
          for (int64_t i = 0; i < m; ++i)  // A^T M
            for (int64_t j = 0; j < a; ++j) {
              double sum = 0;
              for (int64_t r = 0; r < a; ++r) sum += t.AT(i, r) * mk[static_cast<size_t>(r * a + j)];
              am[static_cast<size_t>(i * a + j)] = sum;
            }
          for (int64_t i = 0; i < m && ty * m + i < c.P; ++i)  // (A^T M) A, the valid outputs
            for (int64_t j = 0; j < m && tx * m + j < c.Q; ++j) {
              double y = 0;
              for (int64_t s = 0; s < a; ++s) y += am[static_cast<size_t>(i * a + s)] * t.AT(j, s);
              int64_t o = (((n * c.kb() + k / c.oc) * c.P + ty * m + i) * c.Q + tx * m + j) * c.oc + k % c.oc;
              out[o] = static_cast<float>(epilogue_value(e, y, bias ? bias[k] : 0.f, residual ? residual[o] : 0.f));
            }
        }
      }
}

ComputeDef winograd_compute(const Workload& wl) {
  WinogradTensors w = define_winograd(operators::conv_shape(wl), false);
  return ComputeDef{conv_inputs(w.input, w.weight, w.epilogue_inputs), w.out};
}

Template winograd_template() {
  std::string name = "conv2d_nchwc.cpu.winograd";
  return {name,
          Target::Kind::kLLVM,
          [name](const Workload& w) { return winograd_space(name, operators::conv_shape(w)); },
          [name](const Workload& w, const CpuModel& cpu) { return winograd_default(name, operators::conv_shape(w), cpu); },
          winograd_schedule,
          [](const Workload& w) { return operators::conv_shape(w).winograd > 0; },
          [name](const Workload& w) -> Status {
            if (operators::conv_shape(w).winograd > 0) return Status();
            return invalid_argument(fmt::format("{} computes convolutions with winograd=2 or 4, and {} is a direct "
                                                "one: its template is conv2d_nchwc.cpu.direct",
                                                name, w.to_string()));
          }};
}

}  // namespace tunefarm::ops
