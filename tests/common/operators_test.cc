// The operator descriptions: each operator's typed shape, tensor arguments, FLOPs and checks, as
// the parser, the compiler, the model importer and the benchmarks read them.
#include "common/operators/operator.h"

#include <random>
#include <set>

#include "common/operators/winograd.h"

#include <gtest/gtest.h>

namespace tunefarm::operators {
namespace {

Workload parse(const char* text) {
  auto w = parse_workload(text);
  EXPECT_TRUE(w.ok()) << text << ": " << w.status().to_string();
  return *w;
}

TEST(Operators, EachIsRegisteredOnceAndFoundByName) {
  std::set<std::string> names;
  for (const Operator& op : all_operators()) {
    EXPECT_TRUE(names.insert(op.name).second) << op.name;
    EXPECT_EQ(find_operator(op.name), &op);
    EXPECT_FALSE(op.params.empty()) << op.name;
  }
  EXPECT_EQ(names.size(), 8u);
  EXPECT_EQ(find_operator("conv3d"), nullptr);
}

TEST(Operators, GemmShapesAndArguments) {
  Workload dense = parse("dense:M=4,N=8,K=16,bias=1,relu=1");
  ASSERT_TRUE(is_gemm(dense));
  EXPECT_FALSE(is_conv(dense));
  GemmShape g = gemm_shape(dense);
  EXPECT_TRUE(g.transpose_b && g.bias && g.relu && !g.batched);
  std::vector<TensorArg> args = tensor_args(dense);
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args[1].name, "W");
  EXPECT_EQ(args[1].shape, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(args[2].name, "bias");
  EXPECT_TRUE(args[3].is_output);
  EXPECT_DOUBLE_EQ(flops(dense), 2.0 * 4 * 8 * 16);

  // W in column panels of 16: [ceil(20 / 16), K, 16], the second panel padded; same FLOPs. The
  // workload without them is the plain dense layer.
  Workload panels = parse("dense:M=4,N=20,K=16,bias=1,w_block=16");
  EXPECT_EQ(gemm_shape(panels).w_block, 16);
  EXPECT_EQ(tensor_args(panels)[1].shape, (std::vector<int64_t>{2, 16, 16}));
  EXPECT_EQ(tensor_args(panels)[1].layout, "NK16n");
  EXPECT_DOUBLE_EQ(flops(panels), 2.0 * 4 * 20 * 16);
  EXPECT_EQ(without_weight_panels(panels).to_string(), "dense:M=4,N=20,K=16,bias=1");
  EXPECT_EQ(without_weight_panels(dense), dense);

  // A transformer's FFN layers: the residual is read like C, after the bias; one activation.
  Workload ffn = parse("dense:M=4,N=8,K=16,bias=1,residual=1,gelu=1");
  GemmShape f = gemm_shape(ffn);
  EXPECT_TRUE(f.bias && f.residual && f.gelu && !f.relu);
  args = tensor_args(ffn);
  ASSERT_EQ(args.size(), 5u);
  EXPECT_EQ(args[3].name, "residual");
  EXPECT_EQ(args[3].shape, (std::vector<int64_t>{4, 8}));
  EXPECT_FALSE(args[3].is_output);
  auto both = parse_workload("dense:M=4,N=8,K=16,relu=1,gelu=1");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("one activation"), std::string::npos) << both.status().message();
  EXPECT_TRUE(gemm_shape(parse("dense:M=4,N=8,K=16,gelu_tanh=1")).gelu_tanh);
  auto two_gelus = parse_workload("dense:M=4,N=8,K=16,gelu=1,gelu_tanh=1");
  ASSERT_FALSE(two_gelus.ok());
  EXPECT_NE(two_gelus.status().message().find("one activation"), std::string::npos) << two_gelus.status().message();

  Workload bmm = parse("batch_matmul:B=3,M=4,N=5,K=6");
  EXPECT_EQ(gemm_shape(bmm).batch, 3);
  EXPECT_EQ(output_shape(bmm), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(reduction_length(bmm), 6);
}

TEST(Operators, ConvolutionShapesInEachLayout) {
  Workload nhwc = parse("conv2d_nhwc:N=1,C=8,H=10,W=12,K=16,R=3,S=3,stride=2,pad=1");
  ConvShape c = conv_shape(nhwc);
  EXPECT_TRUE(c.nhwc && !c.depthwise && !c.blocked());
  EXPECT_EQ(c.P, 5);
  EXPECT_EQ(c.Q, 6);
  EXPECT_EQ(output_shape(nhwc), (std::vector<int64_t>{1, 5, 6, 16}));
  EXPECT_EQ(tensor_args(nhwc)[1].layout, "HWIO");

  Workload blocked = parse("conv2d_nchwc:N=1,C=32,H=7,W=7,K=64,R=3,S=3,pad=1,ic_block=16,oc_block=8,bias=1,residual=1,relu6=1");
  c = conv_shape(blocked);
  EXPECT_TRUE(c.blocked());
  EXPECT_EQ(c.cb(), 2);
  EXPECT_EQ(c.kb(), 8);
  EXPECT_TRUE(c.epilogue.bias && c.epilogue.residual && c.epilogue.relu6 && !c.epilogue.relu);
  std::vector<TensorArg> args = tensor_args(blocked);
  ASSERT_EQ(args.size(), 5u);
  EXPECT_EQ(args[0].layout, "NCHW16c");
  EXPECT_EQ(args[1].layout, "OIHW16i8o");
  EXPECT_EQ(args[1].shape, (std::vector<int64_t>{8, 2, 3, 3, 16, 8}));
  EXPECT_EQ(args[2].shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(args[3].shape, args[4].shape);
  EXPECT_EQ(args[4].shape, (std::vector<int64_t>{1, 8, 7, 7, 8}));
  EXPECT_EQ(reduction_length(blocked), 32 * 9);

  Workload dw = parse("depthwise_conv2d_nchwc:N=1,C=32,H=8,W=8,R=3,S=3,pad=1,block=16");
  c = conv_shape(dw);
  EXPECT_TRUE(c.depthwise && c.blocked());
  EXPECT_EQ(c.K, 32);
  EXPECT_EQ(tensor_args(dw)[1].layout, "CHW16c");
  EXPECT_EQ(reduction_length(dw), 9);
  EXPECT_DOUBLE_EQ(flops(dw), 2.0 * 32 * 8 * 8 * 9);
}

TEST(Operators, TheParserChecksEveryTensorsSizeFromTheArguments) {
  auto huge = parse_workload("dense:M=1048576,N=1048576,K=1");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("tensor C has more than"), std::string::npos) << huge.status().message();
  auto blocks = parse_workload("conv2d_nchwc:N=1,C=24,H=7,W=7,K=64,R=3,S=3,pad=1,ic_block=16,oc_block=16");
  ASSERT_FALSE(blocks.ok());
  EXPECT_NE(blocks.status().message().find("must be multiples of ic_block=16"), std::string::npos);
}

TEST(Operators, AWinogradConvolutionTakesItsWeightTransformedAndCountsTheDirectFlops) {
  Workload w = parse("conv2d_nchwc:N=1,C=32,H=10,W=9,K=48,R=3,S=3,pad=1,ic_block=16,oc_block=16,winograd=4");
  ConvShape c = conv_shape(w);
  EXPECT_EQ(c.winograd, 4);
  EXPECT_EQ(c.alpha(), 6);
  EXPECT_EQ(c.tiles_p(), 3);
  EXPECT_EQ(c.tiles_q(), 3);
  EXPECT_EQ(tensor_args(w)[1].shape, (std::vector<int64_t>{6, 6, 3, 32, 16}));
  EXPECT_EQ(tensor_args(w)[1].layout, "WINO6OI16o");
  EXPECT_DOUBLE_EQ(flops(w), 2.0 * 48 * 10 * 9 * 32 * 9);
  // Its transforms written out, an output sums C * alpha^4 products: the check's tolerance.
  EXPECT_EQ(reduction_length(w), 32 * 6 * 6 * 6 * 6);
  EXPECT_EQ(w.to_string(), "conv2d_nchwc:N=1,C=32,H=10,W=9,K=48,R=3,S=3,stride=1,pad=1,ic_block=16,oc_block=16,winograd=4");
  EXPECT_EQ(conv_shape(parse("conv2d_nchwc:N=1,C=32,H=7,W=7,K=64,R=3,S=3,pad=1,ic_block=16,oc_block=16")).winograd, 0);
  for (const char* bad : {"conv2d_nchwc:N=1,C=16,H=8,W=8,K=16,R=3,S=3,pad=1,ic_block=16,oc_block=16,winograd=3",
                          "conv2d_nchwc:N=1,C=16,H=8,W=8,K=16,R=5,S=5,pad=2,ic_block=16,oc_block=16,winograd=2",
                          "conv2d_nchwc:N=1,C=16,H=8,W=8,K=16,R=3,S=3,stride=2,pad=1,ic_block=16,oc_block=16,winograd=2"}) {
    auto r = parse_workload(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_NE(r.status().message().find("winograd="), std::string::npos) << r.status().message();
  }
}

// The transformed filter, the transformed input tile and the output transform together are the
// 3x3 correlation of the tile: the matrices and the weight layout of winograd.h are right.
TEST(Operators, WinogradsTransformsComputeTheCorrelationOfATile) {
  for (int64_t m : {2, 4}) {
    ConvShape c;
    c.layout = ConvLayout::kNCHWc;
    c.winograd = m;
    c.C = 2, c.K = 2, c.ic = 2, c.oc = 2, c.R = c.S = 3;
    const WinogradMatrices& t = winograd_matrices(m);
    const int64_t a = t.alpha;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> g(2 * 2 * 9), u(static_cast<size_t>(a * a * 4));
    for (float& x : g) x = dist(rng);
    winograd_weight(c, g.data(), u.data());
    std::vector<double> d(static_cast<size_t>(a * a));
    for (double& x : d) x = dist(rng);
    // k = 1, channel = 0: U[e][n][0][0][1].
    auto U = [&](int64_t e, int64_t n) { return static_cast<double>(u[static_cast<size_t>(((e * a + n) * 2 + 0) * 2 + 1)]); };
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double y = 0;
        for (int64_t e = 0; e < a; ++e)
          for (int64_t n = 0; n < a; ++n) {
            double v = 0;  // (B^T d B)[e][n]
            for (int64_t r = 0; r < a; ++r)
              for (int64_t s = 0; s < a; ++s) v += t.BT(e, r) * d[static_cast<size_t>(r * a + s)] * t.BT(n, s);
            y += t.AT(i, e) * U(e, n) * v * t.AT(j, n);
          }
        double direct = 0;
        for (int64_t r = 0; r < 3; ++r)
          for (int64_t s = 0; s < 3; ++s) direct += d[static_cast<size_t>((i + r) * a + j + s)] * g[static_cast<size_t>((1 * 2 + 0) * 9 + r * 3 + s)];
        EXPECT_NEAR(y, direct, 1e-5) << "m=" << m << " at " << i << "," << j;
      }
  }
}

}  // namespace
}  // namespace tunefarm::operators
