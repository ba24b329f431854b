#!/usr/bin/python3
"""Writes the ONNX models tunefarm is tested and benchmarked with: ResNet-50 v1.5, MobileNetV2 1.0
(224x224) and one BERT-base encoder layer (sequence 128), plus small variants of each for tests.

No model can be downloaded where tunefarm is built, so these are written here with the `onnx`
package and deterministic random weights (numpy's generator with a fixed seed). The graphs follow
what exporters write: convolutions followed by BatchNormalization and Relu/Clip (ReLU6), and for
BERT what PyTorch's exporter writes at opset 13: linear layers as MatMul + Add with the weights
already transposed, attention heads through Reshape/Transpose with target shapes computed by
Shape/Gather/Concat chains, LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div, GELU through
Erf, and a symbolic batch dimension on the input.

Usage: make_models.py OUT_DIR [--small-only]
(bert_layer_opset17 is the same layer as exporters write it at opset 17.)
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


class Builder:
    def __init__(self, seed, opset=OPSET, constant_nodes=False):
        self.opset = opset
        # Constants as Constant nodes instead of initializers, as some exporters write them.
        self.constant_nodes = constant_nodes
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.initializers = []
        self.count = 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, array, prefix="w"):
        name = self.name(prefix)
        tensor = numpy_helper.from_array(np.asarray(array), name)
        # Weights stay initializers (Constant nodes are for the small float constants).
        if not self.constant_nodes or tensor.data_type != TensorProto.FLOAT or tensor.dims and np.prod(tensor.dims) > 4096:
            self.initializers.append(tensor)
        else:
            self.nodes.append(helper.make_node("Constant", [], [name], name=self.name("Constant"), value=tensor))
        return name

    def weight(self, shape, fan_in):
        return self.const((self.rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32))

    def node(self, op, inputs, prefix=None, outputs=1, **attrs):
        outs = [self.name(prefix or op.lower()) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=self.name(op), **attrs))
        return outs[0] if outputs == 1 else outs

    # --- Convolutional networks -------------------------------------------------------------
    def conv_bn(self, x, cin, cout, k, stride=1, groups=1, act="relu"):
        w = self.weight((cout, cin // groups, k, k), cin // groups * k * k)
        y = self.node("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=groups)
        scale = self.const((1.0 + 0.1 * self.rng.standard_normal(cout)).astype(np.float32), "bn_scale")
        bias = self.const((0.1 * self.rng.standard_normal(cout)).astype(np.float32), "bn_bias")
        mean = self.const((0.1 * self.rng.standard_normal(cout)).astype(np.float32), "bn_mean")
        var = self.const((1.0 + 0.1 * self.rng.random(cout)).astype(np.float32), "bn_var")
        y = self.node("BatchNormalization", [y, scale, bias, mean, var], epsilon=1e-5)
        if act == "relu":
            y = self.node("Relu", [y])
        elif act == "relu6":
            y = self.node("Clip", [y, self.const(np.float32(0.0), "min"), self.const(np.float32(6.0), "max")])
        return y

    def head(self, x, channels, classes):
        y = self.node("GlobalAveragePool", [x])
        y = self.node("Flatten", [y], axis=1)
        w = self.weight((classes, channels), channels)
        b = self.const(np.zeros(classes, np.float32), "fc_bias")
        return self.node("Gemm", [y, w, b], transB=1)

    # --- Transformer ----------------------------------------------------------------------
    def linear(self, x, fin, fout):
        # PyTorch writes nn.Linear as MatMul with the weight transposed to [in, out], then Add; at
        # opset 17 this script keeps the weight as [out, in] behind a Transpose node instead.
        if self.opset >= 17:
            w = self.node("Transpose", [self.weight((fout, fin), fin)], perm=[1, 0])
        else:
            w = self.weight((fin, fout), fin)
        b = self.const((0.02 * self.rng.standard_normal(fout)).astype(np.float32), "bias")
        return self.node("Add", [self.node("MatMul", [x, w]), b])

    def layer_norm(self, x, hidden):
        if self.opset >= 17:
            return self.node("LayerNormalization", [x, self.const(np.ones(hidden, np.float32), "ln_gamma"),
                                                    self.const(np.zeros(hidden, np.float32), "ln_beta")],
                             axis=-1, epsilon=1e-12)
        mean = self.node("ReduceMean", [x], axes=[-1])
        d = self.node("Sub", [x, mean])
        var = self.node("ReduceMean", [self.node("Pow", [d, self.const(np.float32(2.0), "two")])], axes=[-1])
        std = self.node("Sqrt", [self.node("Add", [var, self.const(np.float32(1e-12), "eps")])])
        y = self.node("Div", [d, std])
        y = self.node("Mul", [y, self.const(np.ones(hidden, np.float32), "ln_gamma")])
        return self.node("Add", [y, self.const(np.zeros(hidden, np.float32), "ln_beta")])

    def gelu(self, x):
        e = self.node("Erf", [self.node("Div", [x, self.const(np.float32(np.sqrt(2.0)), "sqrt2")])])
        y = self.node("Mul", [x, self.node("Add", [e, self.const(np.float32(1.0), "one")])])
        return self.node("Mul", [y, self.const(np.float32(0.5), "half")])

    def dim(self, x, index):
        # Shape -> Gather -> Unsqueeze: how the exporter carries a dimension it cannot fix.
        shape = self.node("Shape", [x])
        d = self.node("Gather", [shape, self.const(np.int64(index), "index")], axis=0)
        return self.node("Unsqueeze", [d, self.const(np.array([0], np.int64), "axes")])

    def split_heads(self, x, batch, seq, heads, head_dim):
        shape = self.node("Concat", [batch, seq, self.const(np.array([heads], np.int64), "heads"),
                                     self.const(np.array([head_dim], np.int64), "head_dim")], axis=0)
        y = self.node("Reshape", [x, shape])
        return self.node("Transpose", [y], perm=[0, 2, 1, 3])

    def model(self, name, inputs, outputs):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="tunefarm-models")
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def resnet50(small):
    b = Builder(50)
    size, width, blocks, classes = (64, 16, [1, 1, 1, 1], 10) if small else (224, 64, [3, 4, 6, 3], 1000)
    x = "input"
    y = b.conv_bn(x, 3, width, 7, stride=2)
    y = b.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, count in enumerate(blocks):
        mid = width * 2**stage
        cout = mid * 4
        for i in range(count):
            stride = 2 if i == 0 and stage > 0 else 1  # v1.5: the stride sits on the 3x3.
            shortcut = y if i > 0 else b.conv_bn(y, cin, cout, 1, stride=stride, act=None)
            z = b.conv_bn(y, cin, mid, 1)
            z = b.conv_bn(z, mid, mid, 3, stride=stride)
            z = b.conv_bn(z, mid, cout, 1, act=None)
            y = b.node("Relu", [b.node("Add", [z, shortcut])])
            cin = cout
    out = b.head(y, cin, classes)
    return b.model("resnet50" + ("_small" if small else ""),
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, size, size])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])])


def mobilenet_v2(small):
    b = Builder(2)
    size, mult, classes = (64, 0.25, 10) if small else (224, 1.0, 1000)
    ch = lambda c: max(8, int(c * mult + 4) // 8 * 8)
    # (expansion, channels, repeats, stride) as in the MobileNetV2 paper.
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    if small:
        settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 1, 2), (6, 64, 1, 2)]
    x = "input"
    cin = ch(32)
    y = b.conv_bn(x, 3, cin, 3, stride=2, act="relu6")
    for t, c, n, s in settings:
        cout = ch(c)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            z = y if t == 1 else b.conv_bn(y, cin, hidden, 1, act="relu6")
            z = b.conv_bn(z, hidden, hidden, 3, stride=stride, groups=hidden, act="relu6")
            z = b.conv_bn(z, hidden, cout, 1, act=None)
            y = b.node("Add", [y, z]) if stride == 1 and cin == cout else z
            cin = cout
    last = ch(1280) if mult > 1 else (1280 if not small else 320)
    y = b.conv_bn(y, cin, last, 1, act="relu6")
    out = b.head(y, last, classes)
    return b.model("mobilenet_v2" + ("_small" if small else ""),
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, size, size])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])])


def bert_layer(small, opset=OPSET):
    b = Builder(128, opset=opset, constant_nodes=opset >= 17)
    seq, hidden, heads, ffn = (16, 64, 2, 128) if small else (128, 768, 12, 3072)
    head_dim = hidden // heads
    x = "hidden_states"
    batch, length = b.dim(x, 0), b.dim(x, 1)
    q = b.split_heads(b.linear(x, hidden, hidden), batch, length, heads, head_dim)
    k = b.split_heads(b.linear(x, hidden, hidden), batch, length, heads, head_dim)
    v = b.split_heads(b.linear(x, hidden, hidden), batch, length, heads, head_dim)
    scores = b.node("MatMul", [q, b.node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.node("Div", [scores, b.const(np.float32(np.sqrt(head_dim)), "scale")])
    probs = b.node("Softmax", [scores], axis=-1)
    context = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.node("Concat", [batch, length, b.const(np.array([hidden], np.int64), "hidden")], axis=0)
    context = b.node("Reshape", [context, merged])
    attn = b.layer_norm(b.node("Add", [b.linear(context, hidden, hidden), x]), hidden)
    inter = b.gelu(b.linear(attn, hidden, ffn))
    out = b.layer_norm(b.node("Add", [b.linear(inter, ffn, hidden), attn]), hidden)
    return b.model("bert_layer" + ("_opset17" if opset >= 17 else "") + ("_small" if small else ""),
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", seq, hidden])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", seq, hidden])])


MODELS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2, "bert_layer": bert_layer,
          # The same layer as exporters write it at opset 17: LayerNormalization as one operator,
          # constants as Constant nodes, linear weights behind Transpose nodes.
          "bert_layer_opset17": lambda small: bert_layer(small, opset=17)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--small-only", action="store_true", help="only the small variants (for tests)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    for name, make in MODELS.items():
        for small in ([True] if args.small_only else [True, False]):
            path = os.path.join(args.out_dir, name + ("_small" if small else "") + ".onnx")
            onnx.save(make(small), path)
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
