// The GEMM family: matmul (C = A·B), dense (C = A·Wᵀ, with an optional epilogue: bias, residual
// add, ReLU or GELU) and batch_matmul (C[b] = A[b]·B[b]). One parameterised definition and one
// pair of templates serve all three.
//
// CPU template "<op>.cpu.packed" (what fast CPU GEMMs do):
//   - B is packed into column panels Bp[j/nr][k][nr] (contiguous vector loads, a padded tail);
//     a dense workload with w_block=nr takes W already in those panels (a model packs its
//     constant weights once when it is built), so that its kernel packs nothing;
//   - the output is blocked for the caches (mb·mr rows × nb·nr columns), the block loops in one
//     of four orders;
//   - an mr × nr register tile accumulates in a local buffer over the whole reduction
//     (cache_write + compute_at), rows unrolled, columns vectorized (nr = 32 is two zmm
//     registers), the reduction unrolled by ku, so that LLVM keeps the tile in registers and emits
//     one broadcast and nr/16 FMAs per row and k;
//   - the copy-out stage applies the epilogue (bias, residual, ReLU or GELU) while the tile is in
//     registers;
//   - with tile_k = kc (large K), the reduction is blocked: per block of kc, the register tile sums
//     its slice of K and adds it to the output block, so that A's rows and B's panel slice stay
//     in L1/L2 across the block instead of streaming all of K through the tile.
// CPU template "dense.cpu.dot" (GEMV-shaped dense layers, few rows): W[N, K] is contiguous along
//   the reduction, so the reduction itself is vectorized: partial sums over K in vector lanes
//   for a few output columns at a time (rfactor-style), then a horizontal sum and the epilogue.
//   (It reads W in panels too, but strided: a model packs no weight of so few rows.)
// CUDA template "<op>.cuda.tiled": blocks over output tiles, threads over sub-tiles, each thread
// accumulating an ry × rx register tile.
#include <algorithm>
#include <memory>
#include <cmath>

#include <fmt/format.h>

#include "compiler/ops/activations.h"
#include "compiler/ops/op.h"
#include "compiler/schedule/schedule.h"

namespace tunefarm::ops {
namespace {

using ir::Expr;
using ir::Var;

using Gemm = operators::GemmShape;

Gemm gemm_of(const Workload& w) { return operators::gemm_shape(w); }

std::vector<int64_t> with_batch(const Gemm& g, std::vector<int64_t> shape) {
  if (g.batched) shape.insert(shape.begin(), g.batch);
  return shape;
}

void gemm_reference(const Workload& w, const std::vector<const float*>& in, float* out) {
  Gemm g = gemm_of(w);
  const float* a = in[0];
  const float* b = in[1];
  const float* bias = g.bias ? in[2] : nullptr;
  const float* residual = g.residual ? in[g.bias ? 3 : 2] : nullptr;
  auto b_at = [&](const float* bn, int64_t k, int64_t j) {
    if (g.w_block > 0) return bn[(j / g.w_block * g.K + k) * g.w_block + j % g.w_block];
    return g.transpose_b ? bn[j * g.K + k] : bn[k * g.N + j];
  };
  for (int64_t n = 0; n < g.batch; ++n) {
    const float* an = a + n * g.M * g.K;
    const float* bn = b + n * g.K * g.N;
    float* cn = out + n * g.M * g.N;
    for (int64_t i = 0; i < g.M; ++i) {
      for (int64_t j = 0; j < g.N; ++j) {
        double acc = 0.0;
        for (int64_t k = 0; k < g.K; ++k)
          acc += double(an[i * g.K + k]) * double(b_at(bn, k, j));
        if (bias) acc += bias[j];
        if (residual) acc += residual[n * g.M * g.N + i * g.N + j];
        if (g.relu && acc < 0) acc = 0;
        if (g.gelu) acc = gelu_reference(acc);
        if (g.gelu_tanh) acc = gelu_tanh_reference(acc);
        if (g.silu) acc = acc / (1.0 + std::exp(-acc));
        cn[i * g.N + j] = static_cast<float>(acc);
      }
    }
  }
}

// The epilogue's inputs (bias [N], residual like C), appended to a definition's inputs after A and
// B, and the epilogue applied to the sum at C[v] (the batch first where there is one): one piece
// of code for every template's copy-out stage.
struct EpilogueInputs {
  te::Tensor bias, residual;
};

bool has_epilogue(const Gemm& g) { return g.bias || g.residual || g.relu || g.gelu || g.gelu_tanh || g.silu; }

EpilogueInputs epilogue_inputs(const Gemm& g, std::vector<te::Tensor>& inputs) {
  EpilogueInputs e;
  if (g.bias) inputs.push_back(e.bias = te::placeholder("bias", {g.N}));
  if (g.residual) inputs.push_back(e.residual = te::placeholder("residual", with_batch(g, {g.M, g.N})));
  return e;
}

Expr apply_epilogue(const Gemm& g, const EpilogueInputs& e, Expr val, const std::vector<Var>& v) {
  if (g.bias) val = val + e.bias(v.back());
  if (g.residual) val = val + e.residual(std::vector<Expr>(v.begin(), v.end()));
  if (g.relu) val = ir::max(val, ir::float_imm(0));
  if (g.gelu) val = gelu(val);
  if (g.gelu_tanh) val = gelu_tanh(val);
  if (g.silu) val = val * sigmoid(val);
  return val;
}

// Tensors of one GEMM definition. `acc` holds the sum; `out` is the output (the epilogue when
// there is one, otherwise acc itself).
struct GemmTensors {
  std::vector<te::Tensor> inputs;
  te::Tensor packed;  // Null when B is read directly.
  // With K blocked: partial[.., i, j, ko] sums block ko of K, and acc sums the blocks.
  te::Tensor partial;
  te::Tensor acc, out;
  te::IterVar k;
};

// `pack_nr` > 0 packs B into panels of that many columns first (0 where W arrives in panels).
GemmTensors define_gemm(const Gemm& g, int64_t pack_nr, int64_t kc = 0) {
  GemmTensors t;
  te::Tensor A = te::placeholder("A", with_batch(g, {g.M, g.K}));
  const int64_t wb = g.w_block;
  te::Tensor B = wb > 0            ? te::placeholder("W", {(g.N + wb - 1) / wb, g.K, wb})
                 : g.transpose_b ? te::placeholder("W", {g.N, g.K})
                                 : te::placeholder("B", with_batch(g, {g.K, g.N}));
  t.inputs = {A, B};
  EpilogueInputs epilogue = epilogue_inputs(g, t.inputs);
  // b is the batch index (ignored when not batched).
  auto b_at = [&](Expr b, Expr k, Expr j) -> Expr {
    if (wb > 0) return B(j / wb, k, j % wb);
    if (g.transpose_b) return B(j, k);
    return g.batched ? B(b, k, j) : B(k, j);
  };
  auto a_at = [&](Expr b, Expr i, Expr k) -> Expr { return g.batched ? A(b, i, k) : A(i, k); };
  t.k = te::reduce_axis(g.K, "k");
  Var kv = t.k->var;
  size_t off = g.batched ? 1 : 0;
  std::vector<std::string> names = g.batched ? std::vector<std::string>{"b", "i", "j"} : std::vector<std::string>{"i", "j"};

  std::function<Expr(Expr, Expr, Expr)> b_read = b_at;
  if (pack_nr > 0) {
    int64_t panels = (g.N + pack_nr - 1) / pack_nr;
    std::vector<std::string> pnames = {"jp", "kp", "jn"};
    if (g.batched) pnames.insert(pnames.begin(), "bp");
    t.packed = te::compute("Bp", with_batch(g, {panels, g.K, pack_nr}), [&](const std::vector<Var>& v) {
      Expr b = g.batched ? Expr(v[0]) : ir::int_imm(0);
      Expr j = v[off] * pack_nr + v[off + 2];
      Expr val = b_at(b, v[off + 1], j);
      // The last panel is padded with zeros when nr does not divide N.
      if (g.N % pack_nr != 0) val = ir::select(ir::lt(j, ir::int_imm(g.N)), b_at(b, v[off + 1], ir::min(j, ir::int_imm(g.N - 1))), ir::float_imm(0));
      return val;
    }, pnames);
    te::Tensor P = t.packed;
    b_read = [&g, P, pack_nr](Expr b, Expr k, Expr j) -> Expr {
      return g.batched ? P(b, j / pack_nr, k, j % pack_nr) : P(j / pack_nr, k, j % pack_nr);
    };
  }
  std::string acc_name = has_epilogue(g) ? "acc" : "C";
  if (kc > 0 && kc < g.K) {
    int64_t blocks = (g.K + kc - 1) / kc;
    te::IterVar ki = te::reduce_axis(kc, "ki");
    std::vector<std::string> pnames = names;
    pnames.push_back("ko");
    t.partial = te::compute("partial", with_batch(g, {g.M, g.N, blocks}), [&](const std::vector<Var>& v) {
      Expr b = g.batched ? Expr(v[0]) : ir::int_imm(0);
      Expr k = Expr(v[off + 2]) * kc + ki->var;
      if (g.K % kc == 0) return te::sum(a_at(b, v[off], k) * b_read(b, k, v[off + 1]), {ki});
      // The last block reads past K: its products are zeros (clamped reads stay in bounds).
      Expr kk = ir::min(k, ir::int_imm(g.K - 1));
      return te::sum(ir::select(ir::lt(k, ir::int_imm(g.K)), a_at(b, v[off], kk) * b_read(b, kk, v[off + 1]),
                                ir::float_imm(0)),
                     {ki});
    }, pnames);
    t.k = te::reduce_axis(blocks, "ko");
    te::Tensor partial = t.partial;
    Var kov = t.k->var;
    t.acc = te::compute(acc_name, with_batch(g, {g.M, g.N}), [&](const std::vector<Var>& v) {
      std::vector<Expr> at(v.begin(), v.end());
      at.push_back(kov);
      return te::sum(partial(at), {t.k});
    }, names);
  } else {
    t.acc = te::compute(acc_name, with_batch(g, {g.M, g.N}), [&](const std::vector<Var>& v) {
      Expr b = g.batched ? Expr(v[0]) : ir::int_imm(0);
      return te::sum(a_at(b, v[off], kv) * b_read(b, kv, v[off + 1]), {t.k});
    }, names);
  }
  t.out = t.acc;
  if (has_epilogue(g)) {
    te::Tensor acc = t.acc;
    t.out = te::compute("C", with_batch(g, {g.M, g.N}), [&](const std::vector<Var>& v) {
      return apply_epilogue(g, epilogue, acc(std::vector<Expr>(v.begin(), v.end())), v);
    }, names);
  }
  return t;
}

ComputeDef gemm_compute(const Workload& w) {
  GemmTensors t = define_gemm(gemm_of(w), 0);
  return ComputeDef{t.inputs, t.out};
}

// ---- CPU template ----

const std::vector<int64_t> kMr = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16};
const std::vector<int64_t> kMb = {1, 2, 4, 8, 16, 32};
const std::vector<int64_t> kNr = {8, 16, 32, 48, 64};
const std::vector<int64_t> kNb = {1, 2, 4, 8, 16, 32};
const std::vector<std::vector<int64_t>> kTileOrders = {{0, 1, 2, 3}, {1, 0, 3, 2}, {1, 0, 2, 3}, {0, 1, 3, 2}};
// Vector accumulators the register tile may use (of 32 zmm registers; the rest hold B and A).
constexpr int64_t kMaxTileElements = 28 * 16;

ConfigSpace cpu_space(const std::string& name, const Workload& w) {
  ConfigSpace s(name);
  // W in panels fixes the register tile's columns to the panels' and leaves nothing to pack.
  int64_t wb = gemm_of(w).w_block;
  s.define_split_candidates("tile_m", {kMb, kMr});
  s.define_split_candidates("tile_n", {kNb, wb > 0 ? std::vector<int64_t>{wb} : kNr});
  s.define_knob("unroll_k", std::vector<int64_t>{1, 2, 4});
  s.define_reorder("order", kTileOrders);
  s.define_knob("pack_b", wb > 0 ? std::vector<int64_t>{0} : std::vector<int64_t>{1, 0});
  s.define_annotate("parallel", {"none", "outer"});
  // 0: the register tile sums all of K (the template before K blocking, first for old configs).
  s.define_knob("tile_k", std::vector<int64_t>{0, 128, 256, 512});
  s.set_validator([](const Config& c) -> Status {
    int64_t mr = knob_list(c, "tile_m")[2], nr = knob_list(c, "tile_n")[2];
    if (mr * nr > kMaxTileElements)
      return invalid_argument(fmt::format("register tile {}x{} has more than {} accumulators", mr, nr, kMaxTileElements));
    return Status();
  });
  return s;
}

int64_t largest_at_most(const std::vector<int64_t>& choices, int64_t limit) {
  int64_t best = choices.front();
  for (int64_t c : choices)
    if (c <= limit) best = c;
  return best;
}

int64_t smallest_at_least(const std::vector<int64_t>& choices, int64_t limit) {
  for (int64_t c : choices)
    if (c >= limit) return c;
  return choices.back();
}

// The register tile: as many accumulators as leave registers for B's vectors and A's broadcast,
// with rows and columns that divide the output where a tile can (a partial tile at the edge of a
// block runs through memory, not registers: 128 rows in tiles of 12 left 8 rows, 6% of the
// work, that ran several times slower). Among tiles of as many accumulators, two vectors of
// columns first, then three, then four: 12x32, 8x48, 6x64 on AVX-512. W in panels fixes the columns.
std::pair<int64_t, int64_t> register_tile(const Gemm& g, const CpuModel& cpu) {
  int64_t best_mr = 0, best_nr = 0;
  for (int64_t vectors : {2, 3, 4}) {
    int64_t nr = vectors * cpu.lanes;
    if (g.w_block > 0 && nr != g.w_block) continue;
    if (g.N % nr != 0 || std::find(kNr.begin(), kNr.end(), nr) == kNr.end()) continue;
    int64_t rows = std::min<int64_t>(12, (cpu.vector_registers - vectors - 1) / vectors);
    for (int64_t mr = rows; mr >= 4; --mr) {
      // A partial tile of 1% of the rows or less (4096 rows in tiles of 12) costs less than
      // fewer accumulators in every tile.
      bool rows_fit = g.M % mr == 0 || (g.M % mr) * 100 <= g.M;
      if (!rows_fit || std::find(kMr.begin(), kMr.end(), mr) == kMr.end()) continue;
      if (mr * vectors > best_mr * best_nr / cpu.lanes) best_mr = mr, best_nr = nr;
      break;
    }
  }
  if (best_mr > 0) return {best_mr, best_nr};
  // Nothing divides: two vectors of columns (32 on AVX-512, 16 on AVX2, 8 on NEON) and as many
  // rows as leave a few registers for B's vectors and A's broadcasts.
  int64_t nr = g.w_block > 0 ? g.w_block : largest_at_most(kNr, std::min<int64_t>(2 * cpu.lanes, g.N >= 16 ? g.N : 8));
  int64_t vectors = std::max<int64_t>(1, (nr + cpu.lanes - 1) / cpu.lanes);
  int64_t rows = std::max<int64_t>(1, (cpu.vector_registers - 4) / vectors);
  return {largest_at_most(kMr, std::min<int64_t>({g.M, 12, rows})), nr};
}

Config cpu_default(const std::string& name, const Workload& w, const CpuModel& cpu) {
  Gemm g = gemm_of(w);
  auto [mr, nr] = register_tile(g, cpu);
  // K in blocks of 256 where that divides it (and K is longer): the B panel slice of a block
  // (256 x nr) stays in L1 beside A's rows, and B's block is packed where the tiles read it
  // rather than all of B up front (9 MiB of a 128x768x3072 GEMM's B went out to memory and came
  // back). 128x768x3072 went from 0.58x to 0.85-0.92x oneDNN. Batched GEMMs keep all of K
  // (attention's K is 64).
  int64_t kc = 0;
  if (!g.batched)
    for (int64_t c : {256, 512, 128})
      if (g.K > c && g.K % c == 0) {
        kc = c;
        break;
      }
  int64_t k_block = kc > 0 ? kc : g.K;
  // All of M in one block where A's block (rows x K block) fits in half of L2: each packed B
  // block is then packed once. Beside it, B's block fills a quarter of L2 (with all of K, the
  // size of L2: B's block streams through L2 from L3 while A's stays; on Zen 4's 1 MiB L2,
  // halving it made 1000^3 1.15x slower).
  int64_t a_floats = kc > 0 ? cpu.l2_bytes / 2 / 4 : cpu.l2_bytes / 4 / 4;
  int64_t b_floats = kc > 0 ? cpu.l2_bytes / 4 / 4 : cpu.l2_bytes / 4;
  int64_t mb = largest_at_most(kMb, std::max<int64_t>(1, a_floats / std::max<int64_t>(1, k_block * mr)));
  int64_t nb = largest_at_most(kNb, std::max<int64_t>(1, b_floats / std::max<int64_t>(1, k_block * nr)));
  int64_t row_tiles = (g.M + mr - 1) / mr;
  if (kc > 0 || g.batched) {
    // With K blocks (or a batch, which threads share instead of the blocks of rows), one block
    // of all the rows where A's block fits: a partial tile at the end of the one block starts at
    // a constant row and stays in registers (a ViT's 197 rows in tiles of 12: dense 1.16-1.29x,
    // batch_matmul 12x197x197x64 1.59x faster than blocks of 16 or 8 tiles, whose partial tile
    // moves with the block and runs through memory).
    mb = std::min(mb, smallest_at_least(kMb, row_tiles));
  } else {
    mb = std::min(mb, largest_at_most(kMb, std::max<int64_t>(1, row_tiles)));
  }
  int64_t column_tiles = (g.N + nr - 1) / nr;
  if (g.N % nr != 0) {
    // A partial tile of columns likewise: one block of all the columns where B's block fits
    // (attention's 197 columns as 128 + 69 left batch_matmul 12x197x197x64 at 0.54x oneDNN).
    nb = std::min(nb, smallest_at_least(kNb, column_tiles));
  } else {
    nb = std::min(nb, largest_at_most(kNb, column_tiles));
  }
  // Without K blocks or a batch, at least two blocks of rows where there are two tiles: the outer
  // loop is what threads share (with K blocks, the blocks of columns join it; halving the rows
  // there would pack each block of B twice).
  if (kc == 0 && !g.batched && g.M >= 2 * mr) mb = std::min(mb, largest_at_most(kMb, (g.M / mr) / 2));
  // With K blocks the rows are one block and the blocks of columns are all threads get: at least
  // four where there are four tiles (a MiniLM layer's 384x384 projections were one block of 8
  // tiles and ran on one thread of two, 0.36 ms either way).
  if (kc > 0 && !g.batched && column_tiles >= 4) nb = std::min(nb, largest_at_most(kNb, column_tiles / 4));
  // Blocks that divide the rows' and columns' tiles, where they can: a last block of a different
  // width (384 columns as 256 + 128) made attention's batch_matmul B=16,M=384,N=384,K=64 about
  // 1.8x slower than blocks of 128 (interleaved, six configs).
  if (g.M % mr == 0)
    while (mb > 1 && (g.M / mr) % mb != 0) mb /= 2;
  if (g.N % nr == 0)
    while (nb > 1 && (g.N / nr) % nb != 0) nb /= 2;
  // B is read where it lies when its rows are contiguous along the columns and it is not packed
  // by blocks: packing all of it up front cost more than it saved (batch_matmul 16x384x384x64
  // 82 vs 93 GFLOP/s). A transposed B (dense's W) is always packed: its columns are strided;
  // W in panels already is.
  bool pack = g.w_block == 0 && g.M >= 4 && (g.transpose_b || kc > 0);
  Config c;
  c.template_name = name;
  c.knobs = {{"tile_m", std::vector<int64_t>{-1, mb, mr}},
             {"tile_n", std::vector<int64_t>{-1, nb, nr}},
             {"unroll_k", int64_t{2}},
             {"order", kTileOrders[0]},
             {"pack_b", int64_t{pack ? 1 : 0}},
             {"parallel", std::string("none")},
             {"tile_k", kc}};
  return c;
}

StatusOr<Scheduled> blocked_k_schedule(const Gemm& g, const Config& c);

// Whether a schedule packs B: as the config says, never where W arrives in panels (a record made
// before the knob was fixed for such workloads may still say 1).
bool packs_b(const Gemm& g, const Config& c) { return knob_int(c, "pack_b") != 0 && g.w_block == 0; }

// Iterations of an outer loop that two threads (and a few more) share evenly enough.
constexpr int64_t kEnoughIterations = 8;

// Whether `extent` splits into whole blocks of `block` (or is one block): a loop of such blocks has
// no shorter last one, whose bound would be a guard in every iteration of a loop it is fused into.
bool whole_blocks(int64_t extent, int64_t block) { return extent % block == 0 || block >= extent; }

// A config's register tiles per block, but no more than the rows (columns) need: a block larger
// than the matrix is the matrix, and its loop of tiles then runs only tiles that hold some of it.
// As configured (MiniLM's 128-row FFN layer tuned to blocks of 32 tiles of 8 rows), the loop ran
// 32 tiles of which the last 16 were empty, and two threads sharing it got all and none.
struct BlockTiles {
  int64_t mb, mr, nb, nr;  // Register tiles per block of rows and the tile's rows; the same for columns.
};
BlockTiles block_tiles(const Gemm& g, const Config& c) {
  int64_t mr = knob_list(c, "tile_m")[2], nr = knob_list(c, "tile_n")[2];
  return {std::min(knob_list(c, "tile_m")[1], (g.M + mr - 1) / mr), mr, std::min(knob_list(c, "tile_n")[1], (g.N + nr - 1) / nr),
          nr};
}

StatusOr<Scheduled> cpu_schedule(const Workload& w, const Config& c) {
  Gemm g = gemm_of(w);
  auto [mb, mr, nb, nr] = block_tiles(g, c);
  int64_t ku = knob_int(c, "unroll_k");
  const auto& order = knob_list(c, "order");
  bool pack = packs_b(g, c);
  bool par = knob_str(c, "parallel") == "outer";
  int64_t kc = knob_int(c, "tile_k");
  if (kc > 0 && kc < g.K && !g.batched) return blocked_k_schedule(g, c);

  GemmTensors t = define_gemm(g, pack ? nr : 0);
  auto owned = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{t.out});
  schedule::Schedule& s = *owned;
  te::Tensor acc = t.acc;
  if (t.out.op == t.acc.op) acc = s.cache_write(t.out, ir::MemScope::kLocal);
  else s[t.acc].set_scope(ir::MemScope::kLocal);

  auto& out = s[t.out];
  size_t off = g.batched ? 1 : 0;
  auto [io, i1] = out.split(out.axis(off), mb * mr);
  auto [im, ii] = out.split(i1, mr);
  auto [jo, j1] = out.split(out.axis(off + 1), nb * nr);
  auto [jm, ji] = out.split(j1, nr);
  std::vector<te::IterVar> tiles = {io, jo, im, jm};
  std::vector<te::IterVar> leaf_order;
  if (g.batched) leaf_order.push_back(out.axis(0));
  for (int64_t p : order) leaf_order.push_back(tiles[p]);
  leaf_order.push_back(ii);
  leaf_order.push_back(ji);
  out.reorder(leaf_order);
  out.unroll(ii);
  out.vectorize(ji);
  if (par) {
    // The outermost tile loop, fused with the next ones while it has too few iterations to share
    // evenly among threads: a BERT layer's 128 rows in blocks of 48 are 3, two threads' shares
    // 2 and 1; with the 3 blocks of columns inside them, 9. A tuned config may make all the rows
    // and all the columns one block each (MiniLM's 128x1536 FFN layer): its threads share the
    // tiles of the block, or one thread of two did all the work. The innermost tile loop stays
    // (the register tile is computed at it), and a loop of tiles joins only where its blocks are
    // whole (a last, shorter block's loop has no constant extent to fuse) or the only block (every
    // one of its tiles holds rows or columns, the last perhaps fewer). A loop of blocks joins an
    // outer one only where its blocks are whole too: fused, the last block's bound is a guard in
    // every iteration, no longer a last iteration of its own (LLaMA's 128 x 512 x 1408 GEMM in
    // blocks of 10 rows inside the column blocks: 2.1 ms fused against 0.73 ms on one thread).
    const bool rows_whole = whole_blocks(g.M, mb * mr), columns_whole = whole_blocks(g.N, nb * nr);
    const int64_t extents[] = {(g.M + mb * mr - 1) / (mb * mr), (g.N + nb * nr - 1) / (nb * nr), mb, nb};
    const bool whole[] = {rows_whole, columns_whole, rows_whole, columns_whole};
    te::IterVar outer = leaf_order[0];
    if (!g.batched) {
      // A loop of one iteration shares nothing: the threads take the next one (all the rows in one
      // block, then columns whose last block is shorter and so not fused: LLaMA's 128 x 1408 up
      // projection ran on one thread of two).
      size_t first = 0;
      while (first < 2 && extents[order[first]] == 1) ++first;
      outer = leaf_order[first];
      int64_t iterations = extents[order[first]];
      for (size_t d = first + 1; d < 3 && iterations < kEnoughIterations && whole[order[d]]; ++d) {
        outer = out.fuse(outer, leaf_order[d]);
        iterations *= extents[order[d]];
      }
    }
    out.parallel(outer);
  }

  auto& a = s[acc];
  a.compute_at(out, leaf_order[off + 3]);
  auto [ko, kin] = a.split(a.reduce_axis(0), ku);
  std::vector<te::IterVar> acc_order = {ko, kin, a.axis(off), a.axis(off + 1)};
  if (g.batched) acc_order.insert(acc_order.begin(), a.axis(0));
  a.reorder(acc_order);
  a.unroll(kin);
  a.unroll(a.axis(off));
  a.vectorize(a.axis(off + 1));

  if (pack) {
    auto& p = s[t.packed];
    p.vectorize(p.axis(off + 2));
    if (par) p.parallel(p.axis(0));
  }
  return Scheduled{std::move(owned), ComputeDef{t.inputs, t.out}.args()};
}

// The packed template with K blocked: the output (or, with an epilogue, an accumulator block
// computed at the output's block) sums the K blocks; inside each, the register tile of partial
// sums is computed over the block's kc values of K, then added to the output tile.
StatusOr<Scheduled> blocked_k_schedule(const Gemm& g, const Config& c) {
  auto [mb, mr, nb, nr] = block_tiles(g, c);
  int64_t ku = knob_int(c, "unroll_k"), kc = knob_int(c, "tile_k");
  bool pack = packs_b(g, c);
  bool par = knob_str(c, "parallel") == "outer";
  GemmTensors t = define_gemm(g, pack ? nr : 0, kc);
  auto owned = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{t.out});
  schedule::Schedule& s = *owned;

  auto& out = s[t.out];
  auto [io, i1] = out.split(out.axis(0), mb * mr);
  auto [im, ii] = out.split(i1, mr);
  auto [jo, j1] = out.split(out.axis(1), nb * nr);
  auto [jm, ji] = out.split(j1, nr);
  out.vectorize(ji);
  out.unroll(ii);
  // The stage that sums the K blocks, tiled like the output: the output itself, or the
  // accumulator block of an epilogue's output block.
  bool epilogue = t.out.op != t.acc.op;
  if (epilogue) out.reorder({io, jo, im, jm, ii, ji});
  else out.reorder({io, jo, out.reduce_axis(0), im, jm, ii, ji});
  te::IterVar block = jo;
  if (par) {
    // The blocks of rows, fused with the blocks of columns where they are too few to share (a
    // BERT layer's 128 rows are one block: its 4 or 16 blocks of columns are what threads share),
    // where the blocks of columns are whole (as in cpu_schedule: a last, shorter one's bound would
    // be a guard in every fused iteration).
    int64_t row_blocks = (g.M + mb * mr - 1) / (mb * mr);
    bool fused = row_blocks < kEnoughIterations && whole_blocks(g.N, nb * nr);
    if (fused) block = out.fuse(io, jo);
    out.parallel(fused ? block : io);
  }
  te::IterVar rn, rk;
  schedule::Stage* r = &out;
  if (epilogue) {
    auto& a = s[t.acc];
    a.compute_at(out, block);
    auto [am, ai] = a.split(a.axis(0), mr);
    auto [an, aj] = a.split(a.axis(1), nr);
    rk = a.reduce_axis(0);
    a.reorder({rk, am, an, ai, aj});
    a.vectorize(aj);
    a.unroll(ai);
    r = &a;
    rn = an;
  } else {
    rk = out.reduce_axis(0);
    rn = jm;
  }
  auto& p = s[t.partial];
  p.set_scope(ir::MemScope::kLocal);
  p.compute_at(*r, rn);
  auto [ko, kin] = p.split(p.reduce_axis(0), ku);
  p.reorder({p.axis(2), ko, kin, p.axis(0), p.axis(1)});
  p.unroll(kin);
  p.unroll(p.axis(0));
  p.vectorize(p.axis(1));
  if (pack) {
    // B is packed a block at a time, the panels of this block of columns over this block of K,
    // just before the register tiles read them: the packed block stays in L2 instead of the
    // whole packed B going out to memory and coming back.
    auto& pk = s[t.packed];
    pk.compute_at(*r, rk);
    if (g.transpose_b) {
      // W[N, K] is read along its rows, 16 values of K (a cache line) of one row at a time, and
      // written down the panel; reading 48 rows at once for a vector of columns gathered from
      // rows 12 KiB apart (K = 3072), all in one L1 set. The inner split of the columns keeps
      // them the innermost dimension of the block's layout (a block's layout follows its loops).
      auto [kpo, kpi] = pk.split(pk.axis(1), 16);
      auto [jno, jni] = pk.split(pk.axis(2), 1);
      pk.reorder({pk.axis(0), kpo, jno, kpi, jni});
      pk.unroll(kpi);
    } else {
      pk.vectorize(pk.axis(2));
    }
    // A block computed at a loop lives on the stack; one larger than a few hundred KiB (a tuned
    // config may ask for 512 x 32 x 64) goes to the workspace, allocated once per block.
    constexpr int64_t kStackBlockBytes = 256 * 1024;
    if (kc * nb * nr * 4 > kStackBlockBytes) pk.set_scope(ir::MemScope::kWorkspace);
  }
  return Scheduled{std::move(owned), ComputeDef{t.inputs, t.out}.args()};
}

// ---- CUDA template ----

ConfigSpace cuda_space(const std::string& name) {
  ConfigSpace s(name);
  s.define_split_candidates("tile_y", {{1, 2, 4, 8, 16, 32}, {1, 2, 4, 8}});
  s.define_split_candidates("tile_x", {{1, 2, 4, 8, 16, 32, 64}, {1, 2, 4, 8}});
  s.define_knob("unroll_k", std::vector<int64_t>{1, 2, 4, 8});
  // Stage the A and B tiles of each unroll_k-deep slice of the reduction in shared memory.
  s.define_knob("shared", std::vector<int64_t>{0, 1});
  s.set_validator([](const Config& c) -> Status {
    int64_t threads = knob_list(c, "tile_y")[1] * knob_list(c, "tile_x")[1];
    if (threads > 1024) return invalid_argument(fmt::format("{} threads per block (at most 1024)", threads));
    if (threads < 32) return invalid_argument(fmt::format("{} threads per block is less than a warp", threads));
    // 8x8 is what fast FP32 GEMMs on GPUs hold per thread (64 accumulators; 255 registers is the cap).
    int64_t regs = knob_list(c, "tile_y")[2] * knob_list(c, "tile_x")[2];
    if (regs > 64) return invalid_argument(fmt::format("a {}-element register tile per thread (at most 64)", regs));
    return Status();
  });
  return s;
}

// 128 threads of 4x4 outputs over a 16x128 block tile, where the matrix is that large: on an H200
// (bench/gpu/results-h200) 21.0 TFLOP/s on the 4096 GEMM and 10.8 on the 1024 one, where 256 threads
// over 64x64 (the old default) gave 14.6 and 7.2 and the tuned bests 21.2 and 15.5.
Config cuda_default(const std::string& name, const Workload& w) {
  Gemm g = gemm_of(w);
  bool large = g.M >= 64 && g.N >= 128;
  std::vector<int64_t> tile_y{-1, g.M >= 64 ? 16 : 4, g.M >= 64 ? 4 : 1};
  std::vector<int64_t> tile_x{-1, g.N >= 64 ? 16 : 8, g.N >= 64 ? 4 : 1};
  if (large) {
    tile_y = {-1, 4, 4};
    tile_x = {-1, 32, 4};
  }
  Config c;
  c.template_name = name;
  c.knobs = {{"tile_y", tile_y},
             {"tile_x", tile_x},
             {"unroll_k", int64_t{8}},
             {"shared", int64_t{1}}};
  return c;
}

StatusOr<Scheduled> cuda_schedule(const Workload& w, const Config& c) {
  Gemm g = gemm_of(w);
  int64_t ty = knob_list(c, "tile_y")[1], ry = knob_list(c, "tile_y")[2];
  int64_t tx = knob_list(c, "tile_x")[1], rx = knob_list(c, "tile_x")[2];
  int64_t ku = knob_int(c, "unroll_k");
  GemmTensors t = define_gemm(g, 0);
  auto owned = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{t.out});
  schedule::Schedule& s = *owned;
  te::Tensor acc = t.acc;
  if (t.out.op == t.acc.op) acc = s.cache_write(t.out, ir::MemScope::kLocal);
  else s[t.acc].set_scope(ir::MemScope::kLocal);
  auto& out = s[t.out];
  size_t off = g.batched ? 1 : 0;
  auto [by, i1] = out.split(out.axis(off), ty * ry);
  auto [thy, iy] = out.split(i1, ry);
  auto [bx, j1] = out.split(out.axis(off + 1), tx * rx);
  auto [thx, jx] = out.split(j1, rx);
  std::vector<te::IterVar> order = {by, bx, thy, thx, iy, jx};
  if (g.batched) order.insert(order.begin(), out.axis(0));
  out.reorder(order);
  if (g.batched) out.bind(out.axis(0), "blockIdx.z");
  out.bind(by, "blockIdx.y");
  out.bind(bx, "blockIdx.x");
  out.bind(thy, "threadIdx.y");
  out.bind(thx, "threadIdx.x");
  out.unroll(iy);
  out.unroll(jx);
  auto& a = s[acc];
  a.compute_at(out, thx);
  auto [ko, kin] = a.split(a.reduce_axis(0), ku);
  std::vector<te::IterVar> acc_order = {ko, kin, a.axis(off), a.axis(off + 1)};
  if (g.batched) acc_order.insert(acc_order.begin(), a.axis(0));
  a.reorder(acc_order);
  a.unroll(kin);
  a.unroll(a.axis(off));
  a.unroll(a.axis(off + 1));
  if (knob_int(c, "shared") != 0) {
    // Each slice of A and B the block needs is copied to shared memory cooperatively: rows over
    // threadIdx.y, columns over threadIdx.x. The copy uses no more threads than the block's own
    // loops (fewer when the matrix is smaller than a block tile): a thread outside those loops
    // would skip the barriers that the others wait at.
    int64_t ty_used = std::min(ty, (g.M + ry - 1) / ry), tx_used = std::min(tx, (g.N + rx - 1) / rx);
    for (const te::Tensor& input : {t.inputs[0], t.inputs[1]}) {
      te::Tensor staged = s.cache_read(input, ir::MemScope::kShared, {acc});
      auto& st = s[staged];
      st.compute_at(a, ko);
      auto [ro, rt] = st.split(st.axis(off), ty_used);
      auto [co, ct] = st.split(st.axis(off + 1), tx_used);
      std::vector<te::IterVar> copy_order = {ro, co, rt, ct};
      if (g.batched) copy_order.insert(copy_order.begin(), st.axis(0));
      st.reorder(copy_order);
      st.bind(rt, "threadIdx.y");
      st.bind(ct, "threadIdx.x");
    }
  }
  return Scheduled{std::move(owned), ComputeDef{t.inputs, t.out}.args()};
}

// ---- CPU dot-product template (dense only) ----

ConfigSpace dot_space(const std::string& name) {
  ConfigSpace s(name);
  s.define_knob("vector", std::vector<int64_t>{16, 8});
  s.define_split_candidates("tile_n", {{1, 2, 4, 6, 8}});
  s.define_knob("unroll_k", std::vector<int64_t>{1, 2, 4});
  s.define_annotate("parallel", {"none", "outer"});
  return s;
}

// One output column at a time: W is then read as one stream, row after row, which is what a
// model's classifier needs with its weights coming from memory (MobileNetV3-Small's two GEMVs,
// 6.4 MB: 0.37 ms in the model against 0.52 with four rows at a time, whose four streams the
// prefetcher followed worse; in the cache the two are within 0.94-1.21x of each other).
// Every GEMV job's best config had one column too.
Config dot_default(const std::string& name, const Workload&, const CpuModel& cpu) {
  Config c;
  c.template_name = name;
  c.knobs = {{"vector", int64_t{cpu.lanes >= 16 ? 16 : 8}},
             {"tile_n", std::vector<int64_t>{-1, 1}},
             {"unroll_k", int64_t{4}},
             {"parallel", std::string("none")}};
  return c;
}

StatusOr<Scheduled> dot_schedule(const Workload& w, const Config& c) {
  Gemm g = gemm_of(w);
  int64_t v = knob_int(c, "vector"), jr = knob_list(c, "tile_n")[1];
  bool par = knob_str(c, "parallel") == "outer";
  int64_t ko_extent = (g.K + v - 1) / v;
  te::Tensor A = te::placeholder("A", {g.M, g.K});
  const int64_t wb = g.w_block;
  te::Tensor W = wb > 0 ? te::placeholder("W", {(g.N + wb - 1) / wb, g.K, wb}) : te::placeholder("W", {g.N, g.K});
  auto w_at = [&](Expr j, Expr k) -> Expr { return wb > 0 ? W(j / wb, k, j % wb) : W(j, k); };
  std::vector<te::Tensor> inputs = {A, W};
  EpilogueInputs epilogue = epilogue_inputs(g, inputs);
  te::IterVar ko = te::reduce_axis(ko_extent, "ko");
  // Lane kv of the partial sums accumulates k = ko*v + kv; lanes past K add zeros.
  te::Tensor partial = te::compute("partial", {g.M, g.N, v}, [&](const std::vector<Var>& i) {
    Expr k = Expr(ko->var) * v + i[2];
    Expr prod = A(i[0], k) * w_at(i[1], k);
    if (g.K % v != 0) {
      Expr kc = ir::min(k, ir::int_imm(g.K - 1));
      prod = ir::select(ir::lt(k, ir::int_imm(g.K)), A(i[0], kc) * w_at(i[1], kc), ir::float_imm(0));
    }
    return te::sum(prod, {ko});
  }, {"i", "j", "kv"});
  te::IterVar kv = te::reduce_axis(v, "kv");
  te::Tensor acc = te::compute(has_epilogue(g) ? "acc" : "C", {g.M, g.N}, [&](const std::vector<Var>& i) {
    return te::sum(partial(i[0], i[1], kv->var), {kv});
  }, {"i", "j"});
  te::Tensor out = acc;
  if (has_epilogue(g)) {
    out = te::compute("C", {g.M, g.N}, [&](const std::vector<Var>& i) {
      return apply_epilogue(g, epilogue, acc(i[0], i[1]), i);
    }, {"i", "j"});
  }
  auto owned = std::make_unique<schedule::Schedule>(std::vector<te::Tensor>{out});
  schedule::Schedule& s = *owned;
  auto& o = s[out];
  auto [jo, ji] = o.split(o.axis(1), jr);
  if (par) o.parallel(jo);
  auto& p = s[partial];
  p.set_scope(ir::MemScope::kLocal);
  // The horizontal sums are unrolled so that every access to the partial sums has a constant
  // index: only then does LLVM keep them in vector registers, instead of storing each FMA's result
  // to the stack and summing lanes in a loop through memory (a third of a GEMV's time).
  if (out.op != acc.op) {
    // The horizontal sum is a stage of its own inside the output tile; the partial sums live
    // inside it.
    auto& a = s[acc];
    a.set_scope(ir::MemScope::kLocal);
    a.compute_at(o, jo);
    p.compute_at(a, a.axis(0));
    a.unroll(a.axis(1));
    a.unroll(a.reduce_axis(0));
    o.unroll(ji);
  } else {
    p.compute_at(o, jo);
    o.unroll(ji);
    o.unroll(o.reduce_axis(0));
  }
  auto [kouter, kinner] = p.split(p.reduce_axis(0), knob_int(c, "unroll_k"));
  p.reorder({p.axis(0), kouter, kinner, p.axis(1), p.axis(2)});
  p.unroll(kinner);
  p.unroll(p.axis(1));
  p.vectorize(p.axis(2));
  inputs.push_back(out);
  return Scheduled{std::move(owned), inputs};
}

OpDef gemm_op(const std::string& name) {
  OpDef op;
  op.name = name;
  op.reference = gemm_reference;
  op.compute = gemm_compute;
  std::string cpu = name + ".cpu.packed", cuda = name + ".cuda.tiled";
  op.templates.push_back({cpu, Target::Kind::kLLVM, [cpu](const Workload& w) { return cpu_space(cpu, w); },
                          [cpu](const Workload& w, const CpuModel& m) { return cpu_default(cpu, w, m); }, cpu_schedule, nullptr, nullptr});
  op.templates.push_back({cuda, Target::Kind::kCUDA, [cuda](const Workload&) { return cuda_space(cuda); },
                          [cuda](const Workload& w, const CpuModel&) { return cuda_default(cuda, w); }, cuda_schedule, nullptr, nullptr});
  if (name == "dense") {
    std::string dot = name + ".cpu.dot";
    op.templates.push_back({dot, Target::Kind::kLLVM, [dot](const Workload&) { return dot_space(dot); },
                            [dot](const Workload& w, const CpuModel& m) { return dot_default(dot, w, m); }, dot_schedule,
                            [](const Workload& w) { return w.param("M") <= 4 && w.param("w_block") == 0; },
                            nullptr});
  }
  return op;
}

}  // namespace

int64_t dense_weight_block(int64_t m, int64_t n, int64_t k, const CpuModel& cpu) {
  // As the dot template's preference: GEMV-shaped layers read W[N, K] along its rows.
  if (m <= 4) return 0;
  Gemm g;
  g.transpose_b = true;
  g.M = m, g.N = n, g.K = k;
  return register_tile(g, cpu).second;
}

std::vector<OpDef> gemm_ops() { return {gemm_op("matmul"), gemm_op("dense"), gemm_op("batch_matmul")}; }

}  // namespace tunefarm::ops
