// The operator descriptions: each operator's typed shape, tensor arguments, FLOPs and checks, as
// the parser, the compiler, the model importer and the benchmarks read them.
#include "common/operators/operator.h"

#include <set>

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

}  // namespace
}  // namespace tunefarm::operators
