#!/usr/bin/python3
"""Writes the ONNX models tunefarm is tested and benchmarked with: ResNet-50 v1.5, MobileNetV2 1.0
(224x224), one BERT-base encoder layer (sequence 128), one ViT-B/16 encoder block (197 tokens) and
one MiniLM-style encoder layer (sequence 128, with an attention mask), plus small variants of each
for tests.

No model can be downloaded where tunefarm is built, so these are written here with the `onnx`
package and deterministic random weights (numpy's generator with a fixed seed). The graphs follow
what exporters write: convolutions followed by BatchNormalization and Relu/Clip (ReLU6), and for
BERT what PyTorch's exporter writes at opset 13: linear layers as MatMul + Add with the weights
already transposed, attention heads through Reshape/Transpose with target shapes computed by
Shape/Gather/Concat chains, LayerNorm decomposed into ReduceMean/Sub/Pow/Sqrt/Div, GELU through
Erf, and a symbolic batch dimension on the input.

Usage: make_models.py OUT_DIR [--small-only] [--only NAME]
       make_models.py OUT_DIR --exporter-patterns
(bert_layer_opset17 is the same layer as exporters write it at opset 17.)

--exporter-patterns runs with a current `onnx` package (build/venv's) and writes small models as
today's exporters do: at the package's own IR version, weights in an external-data file beside the
model (model.onnx.data), at every opset from 13 to the newest the package offers, with the operators
of MobileNetV3/EfficientNet/RegNet/ShuffleNet/ViT/Swin/BERT in the forms PyTorch writes them.
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

    def layer_norm(self, x, hidden, eps=1e-12):
        if self.opset >= 17:
            return self.node("LayerNormalization", [x, self.const(np.ones(hidden, np.float32), "ln_gamma"),
                                                    self.const(np.zeros(hidden, np.float32), "ln_beta")],
                             axis=-1, epsilon=eps)
        mean = self.node("ReduceMean", [x], axes=[-1])
        d = self.node("Sub", [x, mean])
        var = self.node("ReduceMean", [self.node("Pow", [d, self.const(np.float32(2.0), "two")])], axes=[-1])
        std = self.node("Sqrt", [self.node("Add", [var, self.const(np.float32(eps), "eps")])])
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

    def reduce(self, op, x, axes, keepdims=1):
        # Opset 18 moved the axes of reductions from an attribute to an input.
        if self.opset >= 18:
            return self.node(op, [x, self.const(np.array(axes, np.int64), "axes")], keepdims=keepdims)
        return self.node(op, [x], axes=axes, keepdims=keepdims)

    def model(self, name, inputs, outputs, ir_version=8):
        graph = helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)], producer_name="tunefarm-models")
        if ir_version is not None:
            model.ir_version = ir_version
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


def bert_encoder(b, x, hidden, heads, ffn, mask=None):
    """A BERT encoder layer (post-norm) over x [batch, seq, hidden] as PyTorch's exporter writes
    Hugging Face's BertLayer: Q, K and V projections split into heads by Reshape/Transpose, scores
    scaled by Div and, when given, an additive mask [batch, 1, 1, seq] added before the Softmax."""
    head_dim = hidden // heads
    batch, length = b.dim(x, 0), b.dim(x, 1)
    q = b.split_heads(b.linear(x, hidden, hidden), batch, length, heads, head_dim)
    k = b.split_heads(b.linear(x, hidden, hidden), batch, length, heads, head_dim)
    v = b.split_heads(b.linear(x, hidden, hidden), batch, length, heads, head_dim)
    scores = b.node("MatMul", [q, b.node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.node("Div", [scores, b.const(np.float32(np.sqrt(head_dim)), "scale")])
    if mask is not None:
        scores = b.node("Add", [scores, mask])
    probs = b.node("Softmax", [scores], axis=-1)
    context = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    merged = b.node("Concat", [batch, length, b.const(np.array([hidden], np.int64), "hidden")], axis=0)
    context = b.node("Reshape", [context, merged])
    attn = b.layer_norm(b.node("Add", [b.linear(context, hidden, hidden), x]), hidden)
    inter = b.gelu(b.linear(attn, hidden, ffn))
    return b.layer_norm(b.node("Add", [b.linear(inter, ffn, hidden), attn]), hidden)


def bert_layer(small, opset=OPSET):
    b = Builder(128, opset=opset, constant_nodes=opset >= 17)
    seq, hidden, heads, ffn = (16, 64, 2, 128) if small else (128, 768, 12, 3072)
    x = "hidden_states"
    out = bert_encoder(b, x, hidden, heads, ffn)
    return b.model("bert_layer" + ("_opset17" if opset >= 17 else "") + ("_small" if small else ""),
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", seq, hidden])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["batch", seq, hidden])])


def additive_mask(b, wide):
    """BERT's extended attention mask from a [batch, 1, 1, seq] mask of ones and zeros: 0 where it
    is 1, float32's lowest where it is 0 ((1 - mask) * min, after a Cast)."""
    return b.node("Mul", [b.node("Sub", [b.const(np.float32(1), "one"), b.node("Cast", [wide], to=TensorProto.FLOAT)]),
                          b.const(np.float32(np.finfo(np.float32).min), "lowest")])


def minilm_layer(small):
    """A MiniLM-style encoder layer (all-MiniLM-L6's shape: hidden 384, 12 heads of 32, FFN 1536,
    sequence 128), post-norm as BERT's, fed as users export one: the hidden states and an int64
    attention mask [1, seq], turned into BERT's additive mask (Unsqueeze, Cast, Sub, Mul)."""
    b = Builder(384)
    seq, hidden, heads, ffn = (16, 32, 4, 64) if small else (128, 384, 12, 1536)
    x, mask = "hidden_states", "attention_mask"
    wide = b.node("Unsqueeze", [mask, b.const(np.array([1, 2], np.int64), "axes")])
    out = bert_encoder(b, x, hidden, heads, ffn, mask=additive_mask(b, wide))
    return b.model("minilm_layer" + ("_small" if small else ""),
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, hidden]),
                    helper.make_tensor_value_info(mask, TensorProto.INT64, [1, seq])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, seq, hidden])])


def vit_block(small):
    """One ViT-B/16 encoder block as torchvision builds it (197 tokens of 768: 196 patches and the
    class token; 12 heads of 64, MLP 3072), pre-norm: x + attention(LN(x)), then y + MLP(LN(y)),
    LayerNorm's epsilon 1e-6, exact GELU (through Erf). nn.MultiheadAttention's packed projection
    is one MatMul to 3 x 768, split into Q, K and V by Reshape [1, tokens, 3, heads, 64],
    Transpose and Gather; the scores scaled by Mul."""
    b = Builder(16)
    tokens, hidden, heads, mlp = (17, 64, 4, 128) if small else (197, 768, 12, 3072)
    head_dim = hidden // heads
    x = "x"
    h = b.layer_norm(x, hidden, eps=1e-6)
    qkv = b.linear(h, hidden, 3 * hidden)
    qkv = b.node("Reshape", [qkv, b.const(np.array([1, tokens, 3, heads, head_dim], np.int64), "shape")])
    qkv = b.node("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
    q, k, v = (b.node("Gather", [qkv, b.const(np.int64(i), "index")], axis=0) for i in range(3))
    scores = b.node("MatMul", [q, b.node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.node("Mul", [scores, b.const(np.float32(head_dim ** -0.5), "scale")])
    probs = b.node("Softmax", [scores], axis=-1)
    context = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    context = b.node("Reshape", [context, b.const(np.array([1, tokens, hidden], np.int64), "shape")])
    y = b.node("Add", [x, b.linear(context, hidden, hidden)])
    h = b.gelu(b.linear(b.layer_norm(y, hidden, eps=1e-6), hidden, mlp))
    out = b.node("Add", [y, b.linear(h, mlp, hidden)])
    return b.model("vit_block" + ("_small" if small else ""),
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, tokens, hidden])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, tokens, hidden])])


def token_encoder(small=True):
    """An encoder layer fed as users export transformers: int64 token ids and attention mask in.
    The embedding is a Gather of the ids, the positions a Gather of constant ids; the mask is
    applied the ways exporters write it: BERT's additive (1 - mask) * min (Unsqueeze, Cast, Sub,
    Mul), a Where over Equal(mask, 0), and as the dynamo exporter writes transformers' padding mask
    for scaled_dot_product_attention (Cast to bool, GatherND, And, Where, then IsNaN over the
    probabilities)."""
    b = Builder(36)
    vocab, seq, hidden, heads = 100, 16, 32, 2
    head_dim = hidden // heads
    ids, mask = "input_ids", "attention_mask"
    words = b.node("Gather", [b.weight((vocab, hidden), 1), ids], axis=0)
    positions = b.node("Gather", [b.weight((seq, hidden), 1), b.const(np.arange(seq, dtype=np.int64)[None], "position_ids")],
                       axis=0)
    x = b.layer_norm(b.node("Add", [words, positions]), hidden)
    lowest = np.float32(np.finfo(np.float32).min)
    wide = b.node("Unsqueeze", [mask, b.const(np.array([1, 2], np.int64), "axes")])
    additive = additive_mask(b, wide)
    padded = b.node("Equal", [wide, b.const(np.int64(0), "zero")])
    rows = np.stack([np.zeros(seq, np.int64), np.arange(seq, dtype=np.int64)], axis=-1).reshape(1, 1, 1, seq, 2)
    keep = b.node("GatherND", [b.node("Cast", [mask], to=TensorProto.BOOL), b.const(rows, "kv_index")])
    keep = b.node("And", [b.const(np.ones((1, 1, seq, 1), bool), "causal"), keep])
    batch, length = b.dim(x, 0), b.dim(x, 1)
    q = b.split_heads(b.linear(x, hidden, hidden), batch, length, heads, head_dim)
    k = b.split_heads(b.linear(x, hidden, hidden), batch, length, heads, head_dim)
    v = b.split_heads(b.linear(x, hidden, hidden), batch, length, heads, head_dim)
    scores = b.node("MatMul", [q, b.node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.node("Add", [b.node("Div", [scores, b.const(np.float32(np.sqrt(head_dim)), "scale")]), additive])
    scores = b.node("Where", [padded, b.const(lowest, "lowest"), scores])
    scores = b.node("Where", [keep, scores, b.const(lowest, "lowest")])
    probs = b.node("Softmax", [scores], axis=-1)
    probs = b.node("Where", [b.node("IsNaN", [probs]), b.const(np.float32(0), "zero"), probs])
    context = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    context = b.node("Reshape", [context, b.node("Concat", [batch, length, b.const(np.array([hidden], np.int64), "hidden")],
                                                 axis=0)])
    out = b.layer_norm(b.node("Add", [b.linear(context, hidden, hidden), x]), hidden)
    return b.model("token_encoder_small", [helper.make_tensor_value_info(ids, TensorProto.INT64, [1, seq]),
                                           helper.make_tensor_value_info(mask, TensorProto.INT64, [1, seq])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, seq, hidden])])


def unbuildable(small=True):
    """A model that imports but that a build cannot run: LpNormalization and Det after a convolution."""
    b = Builder(7)
    x = "input"
    y = b.node("Relu", [b.node("Conv", [x, b.weight((8, 3, 3, 3), 27)], kernel_shape=[3, 3], pads=[1, 1, 1, 1])])
    b.nodes.append(helper.make_node("LpNormalization", [y], ["normalized"], name="lp_norm", axis=1, p=2))
    b.nodes.append(helper.make_node("Det", ["normalized"], ["out"], name="determinant"))
    return b.model("unbuildable", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 8])])


# --- Today's exporters (run with a current onnx package) ------------------------------------

def hardswish(b, x):
    # HardSwish is an operator from opset 14; before, exporters write x * HardSigmoid(x).
    if b.opset >= 14:
        return b.node("HardSwish", [x])
    return b.node("Mul", [x, b.node("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)])


def squeeze_excite(b, x, channels, squeezed, gate="HardSigmoid", act="Relu"):
    s = b.node("GlobalAveragePool", [x])
    s = b.node("Conv", [s, b.weight((squeezed, channels, 1, 1), channels), b.const(
        np.zeros(squeezed, np.float32), "se_bias")], kernel_shape=[1, 1])
    s = silu(b, s) if act == "SiLU" else b.node(act, [s])
    s = b.node("Conv", [s, b.weight((channels, squeezed, 1, 1), squeezed), b.const(
        (0.1 * b.rng.standard_normal(channels)).astype(np.float32), "se_bias")], kernel_shape=[1, 1])
    s = b.node(gate, [s], alpha=1.0 / 6, beta=0.5) if gate == "HardSigmoid" else b.node(gate, [s])
    return b.node("Mul", [x, s])


def mobilenet_v3_block(opset):
    """MobileNetV3's pieces: a HardSwish stem, an inverted residual block with a depthwise
    convolution and squeeze-excite (GlobalAveragePool, 1x1 convolutions, HardSigmoid, Mul over
    channels), a head through HardSwish and a reduction over the spatial axes."""
    b = Builder(3, opset=opset)
    x = "input"
    y = hardswish(b, b.conv_bn(x, 3, 16, 3, stride=2, act=None))
    z = b.conv_bn(y, 16, 32, 1, act=None)
    z = hardswish(b, z)
    z = b.conv_bn(z, 32, 32, 3, groups=32, act="relu")
    z = squeeze_excite(b, z, 32, 8)
    z = b.conv_bn(z, 32, 16, 1, act=None)
    y = b.node("Add", [y, z])
    y = hardswish(b, b.conv_bn(y, 16, 48, 1, act=None))
    y = b.reduce("ReduceMean", y, [2, 3], keepdims=0)
    y = hardswish(b, b.node("Gemm", [y, b.weight((32, 48), 48), b.const(np.zeros(32, np.float32), "fc_bias")], transB=1))
    out = b.node("Gemm", [y, b.weight((10, 32), 32), b.const(np.zeros(10, np.float32), "fc_bias")], transB=1)
    return b.model(f"mobilenet_v3_block_opset{opset}",
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 32, 32])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 10])], ir_version=None)


def silu(b, x):
    return b.node("Mul", [x, b.node("Sigmoid", [x])])


def mish(b, x):
    # Mish is an operator from opset 18; before, exporters write x * Tanh(Softplus(x)).
    if b.opset >= 18:
        return b.node("Mish", [x])
    return b.node("Mul", [x, b.node("Tanh", [b.node("Softplus", [x])])])


def chunk_torchscript(b, x, channels):
    """x.chunk(2, dim=1) as the TorchScript exporter writes it: the halves' bounds computed from the
    input's shape (Shape -> Gather -> Add -> Div -> Mul -> Slice)."""
    c = b.node("Gather", [b.node("Shape", [x]), b.const(np.array([1], np.int64), "index")], axis=0)
    half = b.node("Div", [b.node("Add", [c, b.const(np.array([1], np.int64), "one")]), b.const(np.array([2], np.int64), "two")])
    axis = b.const(np.array([1], np.int64), "axes")
    first = b.node("Slice", [x, b.const(np.array([0], np.int64), "start"), half, axis])
    second = b.node("Slice", [x, half, b.node("Mul", [half, b.const(np.array([2], np.int64), "two")]), axis])
    return first, second


def convnet_blocks(opset):
    """RegNetY, EfficientNet and ShuffleNetV2 pieces: a grouped 3x3 convolution (groups of 8
    channels) with squeeze-excite through Sigmoid, SiLU, and a ShuffleNet unit: the channels split
    in halves (Split, or the TorchScript exporter's Slices), one half through 1x1/depthwise/1x1
    convolutions, Concat, and the channel shuffle (Reshape -> Transpose -> Reshape); Mish; a Pad,
    and a MaxPool with ceil_mode as GoogLeNet's."""
    b = Builder(11, opset=opset)
    x = "input"
    y = b.conv_bn(x, 3, 32, 3, stride=2)
    # RegNetY's block: 1x1, grouped 3x3 with squeeze-excite, 1x1, residual.
    z = b.conv_bn(y, 32, 32, 1)
    z = b.conv_bn(z, 32, 32, 3, groups=4)
    z = squeeze_excite(b, z, 32, 8, gate="Sigmoid")
    z = b.conv_bn(z, 32, 32, 1, act=None)
    y = b.node("Relu", [b.node("Add", [y, z])])
    # EfficientNet's activation.
    y = silu(b, b.conv_bn(y, 32, 32, 1, act=None))
    # ShuffleNetV2's unit: one half passes, the other is transformed.
    if opset >= 18:
        left, right = b.node("Split", [y], outputs=2, axis=1, num_outputs=2)
    elif opset >= 15:
        left, right = chunk_torchscript(b, y, 32)
    else:
        left, right = b.node("Split", [y, b.const(np.array([16, 16], np.int64), "split")], outputs=2, axis=1)
    r = b.conv_bn(right, 16, 16, 1)
    r = b.conv_bn(r, 16, 16, 3, groups=16, act=None)
    r = b.conv_bn(r, 16, 16, 1)
    y = b.node("Concat", [left, r], axis=1)
    y = b.node("Reshape", [y, b.const(np.array([1, 2, 16, 8, 8], np.int64), "shape")])
    y = b.node("Transpose", [y], perm=[0, 2, 1, 3, 4])
    y = mish(b, b.node("Reshape", [y, b.const(np.array([1, 32, 8, 8], np.int64), "shape")]))
    # Swin pads its feature map to whole windows; the TorchScript exporter computes the pads from
    # the shape (Mod), in PyTorch's order, turned into ONNX's by Reshape -> Slice(step -1) ->
    # Transpose -> Reshape.
    if 15 <= opset < 18:
        w = b.node("Gather", [b.node("Shape", [y]), b.const(np.array([3], np.int64), "index")], axis=0)
        p = b.node("Mod", [w, b.const(np.array([7], np.int64), "window")])
        pads = b.node("Concat", [p, p, p, p, b.const(np.zeros(4, np.int64), "zeros")], axis=0)
        pads = b.node("Reshape", [pads, b.const(np.array([-1, 2], np.int64), "shape")])
        pads = b.node("Slice", [pads, b.const(np.array([-1], np.int64), "start"), b.const(np.array([-(2**63) + 1], np.int64), "end"),
                                b.const(np.array([0], np.int64), "axes"), b.const(np.array([-1], np.int64), "steps")])
        pads = b.node("Transpose", [pads], perm=[1, 0])
        pads = b.node("Reshape", [pads, b.const(np.array([-1], np.int64), "shape")])
    else:
        pads = b.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    y = b.node("Pad", [y, pads, b.const(np.float32(0.5), "fill")])
    # GoogLeNet's pooling rounds its output size up: the last window reaches past the input.
    y = b.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
    out = b.head(y, 32, 10)
    return b.model(f"convnet_blocks_opset{opset}",
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 16, 16])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 10])], ir_version=None)


def transformer_blocks(opset):
    """ViT, Swin and BERT pieces: a patch embedding (strided Conv, Reshape, Transpose), a class token
    (Concat) and position embedding, LayerNorm, attention with the heads split by Reshape/Transpose
    and picked by Gather, the scores through Einsum (as written for attention), a mask applied by
    Where, Softmax on the last axis, GELU (the Gelu operator from opset 20, its tanh approximation
    otherwise), Swin's window partition (6-D Reshape/Transpose) and the class token taken by Gather,
    after the last norm (RMSNormalization from opset 23)."""
    b = Builder(17, opset=opset)
    hidden, heads, tokens = 32, 2, 17
    head_dim = hidden // heads
    x = "pixels"
    p = b.node("Conv", [x, b.weight((hidden, 3, 4, 4), 48), b.const(np.zeros(hidden, np.float32), "bias")],
               kernel_shape=[4, 4], strides=[4, 4])
    # Swin's window partition of the [1, 4, 4, C] map into 2x2 windows, and back.
    w = b.node("Transpose", [p], perm=[0, 2, 3, 1])
    w = b.node("Reshape", [w, b.const(np.array([1, 2, 2, 2, 2, hidden], np.int64), "shape")])
    w = b.node("Transpose", [w], perm=[0, 1, 3, 2, 4, 5])
    w = b.node("Reshape", [w, b.const(np.array([4, 4, hidden], np.int64), "shape")])
    w = b.node("Reshape", [w, b.const(np.array([1, 2, 2, 2, 2, hidden], np.int64), "shape")])
    w = b.node("Transpose", [w], perm=[0, 1, 3, 2, 4, 5])
    w = b.node("Reshape", [w, b.const(np.array([1, 16, hidden], np.int64), "shape")])
    cls = b.const((0.02 * b.rng.standard_normal((1, 1, hidden))).astype(np.float32), "cls")
    y = b.node("Concat", [cls, w], axis=1)
    y = b.node("Add", [y, b.const((0.02 * b.rng.standard_normal((1, tokens, hidden))).astype(np.float32), "pos")])
    h = b.layer_norm(y, hidden)
    qkv = b.node("MatMul", [h, b.weight((hidden, 3 * hidden), hidden)])
    qkv = b.node("Reshape", [qkv, b.const(np.array([1, tokens, 3, heads, head_dim], np.int64), "shape")])
    qkv = b.node("Transpose", [qkv], perm=[2, 0, 3, 1, 4])
    q, k, v = (b.node("Gather", [qkv, b.const(np.int64(i), "index")], axis=0) for i in range(3))
    # v moved to [b, q, h, d] and back, as a graph edited by hand can leave it: the pair of
    # Transposes and the Gather before them compose into one copy.
    v = b.node("Transpose", [b.node("Transpose", [v], perm=[0, 2, 1, 3])], perm=[0, 2, 1, 3])
    scores = b.node("Einsum", [q, k], equation="bhqd,bhkd->bhqk")
    # Swin's TorchScript export scales by head_dim ** -0.5 computed by Pow.
    scale = (b.node("Pow", [b.const(np.float32(head_dim), "head_dim"), b.const(np.float32(-0.5), "power")])
             if opset < 18 else b.const(np.float32(head_dim ** -0.5), "scale"))
    scores = b.node("Mul", [scores, scale])
    mask = b.rng.random((1, 1, tokens, tokens)) > 0.2
    mask[..., 0] = True
    if opset >= 18:
        # As the dynamo exporter writes Swin's shifted-window mask: computed from constants
        # (ConstantOfShape, ScatterND, Sub, Equal, Not), then applied by Where.
        zeros = b.node("ConstantOfShape", [b.const(np.array(mask.shape, np.int64), "shape")],
                       value=numpy_helper.from_array(np.zeros(1, np.float32)))
        hidden_at = np.argwhere(~mask).astype(np.int64)
        marked = b.node("ScatterND", [zeros, b.const(hidden_at, "indices"), b.const(np.ones(len(hidden_at), np.float32), "ones")])
        marked = b.node("Sub", [marked, b.const(np.float32(0.0), "zero")])
        keep = b.node("Not", [b.node("Equal", [marked, b.const(np.float32(1.0), "one")])])
    else:
        keep = b.const(mask, "mask")
    scores = b.node("Where", [keep, scores, b.const(np.float32(-1e4), "masked")])
    probs = b.node("Softmax", [scores], axis=-1)
    context = b.node("Einsum", [probs, v], equation="bhqk,bhkd->bqhd")
    context = b.node("Reshape", [context, b.const(np.array([1, tokens, hidden], np.int64), "shape")])
    y = b.node("Add", [y, b.linear(context, hidden, hidden)])
    h = b.layer_norm(y, hidden)
    h = b.linear(h, hidden, 2 * hidden)
    if opset >= 20:
        h = b.node("Gelu", [h], approximate="tanh")
    else:
        inner = b.node("Add", [h, b.node("Mul", [b.node("Pow", [h, b.const(np.float32(3.0), "three")]),
                                                 b.const(np.float32(0.044715), "c")])])
        t = b.node("Tanh", [b.node("Mul", [inner, b.const(np.float32(np.sqrt(2 / np.pi)), "c")])])
        h = b.node("Mul", [b.node("Mul", [h, b.const(np.float32(0.5), "half")]),
                           b.node("Add", [t, b.const(np.float32(1.0), "one")])])
    h = b.gelu(b.linear(h, 2 * hidden, hidden)) if opset < 20 else b.node("Gelu", [b.linear(h, 2 * hidden, hidden)])
    y = b.node("Add", [y, h])
    if opset >= 23:
        # RMSNormalization, an operator from opset 23.
        y = b.node("RMSNormalization", [y, b.const((1 + 0.1 * b.rng.standard_normal(hidden)).astype(np.float32), "rms_weight")],
                   epsilon=1e-6)
    else:
        y = b.layer_norm(y, hidden)
    first = b.node("Gather", [y, b.const(np.int64(0), "index")], axis=1)
    out = b.node("Gemm", [first, b.weight((10, hidden), hidden), b.const(np.zeros(10, np.float32), "fc_bias")], transB=1)
    return b.model(f"transformer_blocks_opset{opset}",
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 16, 16])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 10])], ir_version=None)


def audio_front_ends(opset):
    """Audio models' 1-D convolutions: wav2vec 2.0's feature encoder (a strided Conv1d of the raw
    wave without padding, GroupNorm with a group per channel, GELU, two more strided Conv1d with GELU),
    Whisper's (Conv1d over mel frames, GELU, a Conv1d at stride 2, then channels-last with a
    position embedding and LayerNorm), a Conformer's depthwise Conv1d (kernel 7, padded, groups =
    channels) with SiLU, and wav2vec 2.0's weight-normalized grouped positional Conv1d. GroupNorm as the TorchScript exporter writes it, as GroupNormalization
    from opset 21."""
    b = Builder(37, opset=opset)
    wave, mel = "waveform", "mel"

    def conv1d(x, cin, cout, k, stride=1, pad=0, groups=1, bias=True):
        inputs = [x, b.weight((cout, cin // groups, k), cin // groups * k)]
        if bias:
            inputs.append(b.const((0.1 * b.rng.standard_normal(cout)).astype(np.float32), "bias"))
        return b.node("Conv", inputs, kernel_shape=[k], strides=[stride], pads=[pad, pad], group=groups)

    w = conv1d(wave, 1, 16, 10, stride=5, bias=False)
    scale = (1 + 0.1 * b.rng.standard_normal(16)).astype(np.float32)
    shift = (0.1 * b.rng.standard_normal(16)).astype(np.float32)
    if opset >= 21:
        w = b.node("GroupNormalization", [w, b.const(scale, "gn_scale"), b.const(shift, "gn_bias")], num_groups=16, epsilon=1e-5)
    else:
        w = b.node("InstanceNormalization", [w, b.const(scale, "gn_scale"), b.const(shift, "gn_bias")], epsilon=1e-5)
    w = b.gelu(w)
    w = b.gelu(conv1d(w, 16, 16, 3, stride=2, bias=False))
    w = b.gelu(conv1d(w, 16, 16, 2, stride=2, bias=False))
    w = b.node("GlobalAveragePool", [w])
    m = b.gelu(conv1d(mel, 8, 16, 3, pad=1))
    m = b.gelu(conv1d(m, 16, 16, 3, stride=2, pad=1))
    m = b.node("Mul", [b.node("Sigmoid", [conv1d(m, 16, 16, 7, pad=3, groups=16)]), m])
    # wav2vec 2.0's positional convolution, weight-normalized: its weight g * v / ||v|| computed
    # from two parameters in the file (the norm over every axis but the kernel's).
    v, g = b.weight((16, 4, 5), 20), b.const((1 + 0.1 * b.rng.standard_normal((1, 1, 5))).astype(np.float32), "g")
    axes = {"axes": [0, 1]} if opset < 18 else {}
    norm = b.node("ReduceL2", [v] + ([] if opset < 18 else [b.const(np.array([0, 1], np.int64), "axes")]), keepdims=1, **axes)
    weight = b.node("Mul", [g, b.node("Div", [v, norm])])
    m = b.node("Add", [m, b.gelu(b.node("Conv", [m, weight], kernel_shape=[5], pads=[2, 2], group=4))])
    m = b.node("Add", [m, w])
    m = b.node("Transpose", [m], perm=[0, 2, 1])
    m = b.node("Add", [m, b.const((0.02 * b.rng.standard_normal((1, 16, 16))).astype(np.float32), "positions")])
    out = b.layer_norm(m, 16, eps=1e-5)
    return b.model(f"audio_front_ends_opset{opset}",
                   [helper.make_tensor_value_info(wave, TensorProto.FLOAT, [1, 1, 400]),
                    helper.make_tensor_value_info(mel, TensorProto.FLOAT, [1, 8, 32])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 16, 16])], ir_version=None)


def rounding():
    """Floor, Ceil, Round (halves to even) and Sign of computed values, exact halves among them, as
    detection heads' box decoding and quantization-aware exports use them."""
    b = Builder(41, opset=17)
    x = b.node("Mul", ["x", b.const(np.float32(5.3), "scale")])
    x = b.node("Concat", [x, b.const(np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, 3e7]], np.float32), "halves")], axis=1)
    out = b.node("Sum", [b.node(op, [x]) for op in ("Floor", "Ceil", "Round", "Sign")])
    return b.model("rounding", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 40])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 48])], ir_version=None)


def tf_convolutions():
    """Convolutions as tf2onnx writes TensorFlow's (opset 13): auto_pad SAME_UPPER at stride 2 on an
    even map (one more row and column of padding at the end), a depthwise 3x3 with SAME_UPPER (even
    padding), MaxPool and AveragePool with SAME_UPPER, and explicit uneven pads."""
    b = Builder(47, opset=13)
    y = b.node("Conv", ["x", b.weight((8, 3, 3, 3), 27), b.const(np.zeros(8, np.float32), "bias")],
               kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
    y = b.node("Clip", [y, b.const(np.float32(0.0), "min"), b.const(np.float32(6.0), "max")])
    y = b.node("Conv", [y, b.weight((8, 1, 3, 3), 9)], kernel_shape=[3, 3], group=8, auto_pad="SAME_UPPER")
    y = b.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
    y = b.node("AveragePool", [y], kernel_shape=[3, 3], strides=[1, 1], auto_pad="SAME_UPPER")
    y = b.node("Conv", [y, b.weight((16, 8, 2, 2), 32)], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1])
    return b.model("tf_convolutions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 16, 2, 2])])


def symbolic_sizes():
    """Sizes as the dynamo exporter computes them for a model exported with dynamic shapes (opset
    18): one axis by Shape with start and end, the element count by Size, divided into the target
    of a Reshape; and a patch count as the TorchScript exporter writes MobileViT's, in float
    Constant nodes: int(ceil(6.0 / 2.0) * 2.0) / 2; and a Reshape's target through Identity, as the
    TorchScript exporter shares one (Swin V2's qkv bias); and the side of a square grid of patches
    as the TorchScript exporter writes DINOv2's, int(4.0 ** 0.5)."""
    b = Builder(67, opset=18, constant_nodes=True)
    tokens = b.node("Shape", ["x"], start=1, end=2)
    count = b.node("Size", ["x"])
    rest = b.node("Div", [count, b.node("Squeeze", [tokens, b.const(np.array([0], np.int64), "axes")])])
    shape = b.node("Concat", [tokens, b.node("Unsqueeze", [rest, b.const(np.array([0], np.int64), "axes")])], axis=0)
    out = b.node("Relu", [b.node("Reshape", ["x", shape])])
    rows = b.node("Mul", [b.node("Ceil", [b.node("Div", [b.const(np.float32(6.0), "width"), b.const(np.float32(2.0), "patch")])]),
                          b.const(np.float32(2.0), "patch")])
    patches = b.node("Div", [b.node("Cast", [rows], to=TensorProto.INT64), b.const(np.int64(2), "two")])
    patches = b.node("Unsqueeze", [patches, b.const(np.array([0], np.int64), "axes")])
    shape = b.node("Concat", [b.const(np.array([1], np.int64), "one"), patches, b.const(np.array([2, 4], np.int64), "rest")], axis=0)
    split = b.node("Sigmoid", [b.node("Reshape", ["x", shape])])
    flat = b.node("Relu", [b.node("Reshape", ["x", b.node("Identity", [b.const(np.array([24], np.int64), "flat")])])])
    side = b.node("Cast", [b.node("Pow", [b.const(np.float32(4.0), "patches"), b.const(np.float32(0.5), "half")])],
                  to=TensorProto.INT64)
    side = b.node("Unsqueeze", [side, b.const(np.array([0], np.int64), "axes")])
    grid = b.node("Tanh", [b.node("Reshape", ["x", b.node("Concat", [side, b.const(np.array([12], np.int64), "row")], axis=0)])])
    return b.model("symbolic_sizes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 4])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [6, 4]),
                    helper.make_tensor_value_info(split, TensorProto.FLOAT, [1, 3, 2, 4]),
                    helper.make_tensor_value_info(flat, TensorProto.FLOAT, [24]),
                    helper.make_tensor_value_info(grid, TensorProto.FLOAT, [2, 12])], ir_version=None)


def yolo_head():
    """YOLOv8's box decoding (opset 17): the distribution focal loss's Softmax over axis 1 of
    [1, 16, 4, anchors] (a Reshape and Transpose of the 64 box channels), its expectation by a 1x1
    convolution with weights 0..15, and the class scores by Sigmoid; a LogSoftmax over axis 1 too."""
    b = Builder(61, opset=17)
    anchors = 21
    x = b.node("Reshape", ["boxes", b.const(np.array([1, 4, 16, anchors], np.int64), "shape")])
    x = b.node("Softmax", [b.node("Transpose", [x], perm=[0, 2, 1, 3])], axis=1)
    expect = b.const(np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1), "bins")
    x = b.node("Reshape", [b.node("Conv", [x, expect], kernel_shape=[1, 1]), b.const(np.array([1, 4, anchors], np.int64), "shape")])
    scores = b.node("LogSoftmax", [b.node("Sigmoid", ["classes"])], axis=1)
    out = b.node("Concat", [x, scores], axis=1)
    return b.model("yolo_head", [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 64, anchors]),
                                 helper.make_tensor_value_info("classes", TensorProto.FLOAT, [1, 5, anchors])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 9, anchors])])


def reductions():
    """Reductions: over the last axis alone, which run as row-wise steps across the row's lanes:
    ReduceMax keeping the axis, ReduceMin dropping it, ReduceSum with its axes as an input (opset
    13), ReduceMean, over rows of 197 (ViT's tokens: not a multiple of the vector); then a sentence
    embedding's head as the TorchScript exporter writes sentence-transformers' (mean pooling, then
    F.normalize: ReduceL2, Clip, Expand, Div), ReduceL1, ReduceSumSquare and ReduceLogSumExp
    over the middle axis, and ReduceL2 and ReduceMax over all axes but the last (ConvNeXt V2's
    global response norm)."""
    b = Builder(59, opset=13)
    outs = [b.node("ReduceMax", ["x"], axes=[-1], keepdims=1), b.node("ReduceMin", ["x"], axes=[2], keepdims=0),
            b.node("ReduceSum", ["x", b.const(np.array([-1], np.int64), "axes")], keepdims=1),
            b.node("ReduceMean", ["x"], axes=[-1], keepdims=0)]
    pooled = b.node("ReduceMean", ["x"], axes=[1], keepdims=0)
    norm = b.node("Clip", [b.node("ReduceL2", [pooled], axes=[-1], keepdims=1), b.const(np.float32(1e-12), "eps")])
    outs.append(b.node("Div", [pooled, b.node("Expand", [norm, b.const(np.array([2, 197], np.int64), "shape")])]))
    outs += [b.node(op, ["x"], axes=[1], keepdims=0) for op in ("ReduceL1", "ReduceSumSquare", "ReduceLogSumExp")]
    # ConvNeXt V2's global response norm: the L2 norm over every axis but the channels-last one.
    outs += [b.node("ReduceL2", ["x"], axes=[0, 1], keepdims=1), b.node("ReduceMax", ["x"], axes=[1, 0], keepdims=0)]
    shapes = [[2, 3, 1], [2, 3], [2, 3, 1], [2, 3], [2, 197], [2, 197], [2, 197], [2, 197], [1, 1, 197], [197]]
    return b.model("reductions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 197])],
                   [helper.make_tensor_value_info(o, TensorProto.FLOAT, s) for o, s in zip(outs, shapes)])


def padding_modes():
    """CycleGAN's and style transfer's residual blocks as the TorchScript exporter writes them
    (opset 17): ReflectionPad2d before a convolution that pads nothing, InstanceNorm, ReLU; then
    ReplicationPad2d (Pad mode edge) of uneven sides."""
    b = Builder(53, opset=17)
    y = b.node("Pad", ["x", b.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")], mode="reflect")
    y = b.node("Conv", [y, b.weight((4, 3, 3, 3), 27)], kernel_shape=[3, 3])
    y = b.node("InstanceNormalization", [y, b.const(np.ones(4, np.float32), "scale"), b.const(np.zeros(4, np.float32), "bias")])
    y = b.node("Relu", [y])
    y = b.node("Pad", [y, b.const(np.array([0, 0, 2, 0, 0, 0, 0, 3], np.int64), "pads")], mode="edge")
    return b.model("padding_modes", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 4, 10, 11])])


def argmax_heads():
    """A segmentation head's ArgMax over the classes (int64 labels out, ties among ReLU's zeros: the
    first index wins), an ArgMin along the last axis keeping it, the last index among ties, and a
    detection head's boolean of which scores pass a threshold."""
    b = Builder(43, opset=17)
    y = b.node("Relu", [b.node("Conv", ["x", b.weight((5, 3, 1, 1), 3)], kernel_shape=[1, 1])])
    labels = b.node("ArgMax", [y], axis=1, keepdims=0)
    lowest = b.node("ArgMin", [y], axis=-1, keepdims=1, select_last_index=1)
    kept = b.node("Greater", [y, b.const(np.array(0.05, np.float32), "threshold")])
    return b.model("argmax_heads", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 6])],
                   [helper.make_tensor_value_info(labels, TensorProto.INT64, [1, 4, 6]),
                    helper.make_tensor_value_info(lowest, TensorProto.INT64, [1, 5, 4, 1]),
                    helper.make_tensor_value_info(kept, TensorProto.BOOL, [1, 5, 4, 6])], ir_version=None)


def view_outputs():
    """An output that is a view (a Reshape) of another value and that later steps read too: the
    steps read it before the build copies it into the caller's buffer."""
    b = Builder(47, opset=17)
    flat = b.node("Reshape", ["x", b.const(np.array([1, 16, 20], np.int64), "flat_shape")])
    row = b.node("Reshape", [b.node("Relu", [flat]), b.const(np.array([1, 16, 1, 20], np.int64), "row_shape")])
    y = b.node("Conv", [row, b.weight((16, 16, 1, 3), 48)], kernel_shape=[1, 3], pads=[0, 1, 0, 1])
    return b.model("view_outputs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 1, 20])],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 16, 1, 20]),
                    helper.make_tensor_value_info(flat, TensorProto.FLOAT, [1, 16, 20])], ir_version=None)


def recurrent():
    """Recurrent layers as the exporters write nn.LSTM and nn.GRU (opset 14): a bidirectional LSTM
    with initial states, peepholes and sequence_lens of the whole sequence, its Y, Y_h and Y_c read;
    a GRU with linear_before_reset (PyTorch's) over a batch of two, one without it in reverse, and
    a plain RNN, each read through its Y or Y_h alone."""
    b = Builder(71, opset=14)
    seq, batch, inputs, hidden = 5, 1, 6, 8

    def w(*shape):
        return b.const((0.4 * b.rng.standard_normal(shape)).astype(np.float32))

    h0 = w(2, batch, hidden)
    c0 = w(2, batch, hidden)
    lens = b.const(np.full(batch, seq, np.int32), "lens")
    y, y_h, y_c = b.node("LSTM", ["x", w(2, 4 * hidden, inputs), w(2, 4 * hidden, hidden), w(2, 8 * hidden), lens, h0, c0,
                                  w(2, 3 * hidden)], outputs=3, hidden_size=hidden, direction="bidirectional")
    pair = b.node("Concat", ["x", b.node("Neg", ["x"])], axis=1)
    g = b.node("GRU", [pair, w(1, 3 * hidden, inputs), w(1, 3 * hidden, hidden), w(1, 6 * hidden)], outputs=2,
               hidden_size=hidden, linear_before_reset=1)
    _, g_rev = b.node("GRU", ["x", w(1, 3 * hidden, inputs), w(1, 3 * hidden, hidden), w(1, 6 * hidden)], outputs=2,
                      hidden_size=hidden, direction="reverse")
    r = b.node("RNN", ["x", w(1, hidden, inputs), w(1, hidden, hidden)], outputs=2, hidden_size=hidden)
    return b.model("recurrent", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, inputs])],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, [seq, 2, batch, hidden]),
                    helper.make_tensor_value_info(y_h, TensorProto.FLOAT, [2, batch, hidden]),
                    helper.make_tensor_value_info(y_c, TensorProto.FLOAT, [2, batch, hidden]),
                    helper.make_tensor_value_info(g[0], TensorProto.FLOAT, [seq, 1, 2, hidden]),
                    helper.make_tensor_value_info(g_rev, TensorProto.FLOAT, [1, batch, hidden]),
                    helper.make_tensor_value_info(r[0], TensorProto.FLOAT, [seq, 1, batch, hidden])], ir_version=None)


def broadcast_matmuls():
    """Batched MatMuls whose batches broadcast: Falcon's multi-query attention (every head's queries
    by one head of keys, [1, 4, 8, 16] by [1, 1, 16, 8]), the same with the right side of a higher
    rank, both sides broadcasting ([4, 8, 16] by [2, 1, 16, 8]) and a matrix by a batch."""
    b = Builder(73, opset=17)
    keys = b.node("Relu", ["k"])
    shared = b.node("MatMul", ["q", keys])
    raised = b.node("MatMul", [b.node("Reshape", ["q", b.const(np.array([4, 8, 16], np.int64), "heads")]), keys])
    both = b.node("MatMul", [b.node("Reshape", ["q", b.const(np.array([4, 8, 16], np.int64), "heads")]),
                             b.node("Concat", [keys, b.node("Neg", [keys])], axis=0)])
    batch = b.node("MatMul", [b.weight((8, 16), 16), b.node("Reshape", [b.node("Concat", [keys, keys, keys], axis=1),
                                                                      b.const(np.array([3, 16, 8], np.int64), "batch")])])
    return b.model("broadcast_matmuls", [helper.make_tensor_value_info("q", TensorProto.FLOAT, [1, 4, 8, 16]),
                                         helper.make_tensor_value_info("k", TensorProto.FLOAT, [1, 1, 16, 8])],
                   [helper.make_tensor_value_info(shared, TensorProto.FLOAT, [1, 4, 8, 8]),
                    helper.make_tensor_value_info(raised, TensorProto.FLOAT, [1, 4, 8, 8]),
                    helper.make_tensor_value_info(both, TensorProto.FLOAT, [2, 4, 8, 8]),
                    helper.make_tensor_value_info(batch, TensorProto.FLOAT, [3, 8, 8])], ir_version=None)


def timm_convolutions():
    """Convolutions as timm's models write them (the dynamo exporter, opset 18): NFNet's weight
    standardization, the weight's rows normalized by a BatchNormalization whose mean and variance
    are ReduceMeans of the weight itself, and PiT's and FastViT's depthwise convolution with two
    filters per channel."""
    b = Builder(79, opset=18)
    rows = b.node("Reshape", [b.weight((8, 4, 3, 3), 36), b.const(np.array([1, 8, 36], np.int64), "rows")], allowzero=1)
    axes = b.const(np.array([0, 2], np.int64), "axes")
    mean = b.node("ReduceMean", [rows, axes], keepdims=0)
    centered = b.node("Sub", [rows, b.node("ReduceMean", [rows, axes], keepdims=1)])
    var = b.node("ReduceMean", [b.node("Mul", [centered, centered]), axes], keepdims=0)
    gain = b.const((1 + 0.1 * b.rng.standard_normal(8)).astype(np.float32), "gain")
    std = b.node("BatchNormalization", [rows, gain, b.const(np.zeros(8, np.float32), "zero"), mean, var], epsilon=1e-5)
    weight = b.node("Reshape", [std, b.const(np.array([8, 4, 3, 3], np.int64), "oihw")], allowzero=1)
    y = b.node("Conv", ["x", weight], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    y = b.node("Conv", [y, b.weight((16, 1, 3, 3), 9), b.const(np.full(16, 0.1, np.float32), "bias")], kernel_shape=[3, 3],
               strides=[2, 2], pads=[1, 1, 1, 1], group=8)
    return b.model("timm_convolutions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 12, 12])],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 16, 6, 6])], ir_version=None)


def spatial_reductions():
    """Reductions over rows and columns of convolutions' outputs (opset 18, axes as inputs):
    ConvNeXt V2's global response norm (ReduceL2 over H and W, its mean over channels, the input
    scaled by it), ReduceMax, ReduceMin, ReduceSum, ReduceL1, ReduceSumSquare and GlobalMaxPool as
    channel gates, over 32 channels and over 24 (padded to whole vectors), and a ReduceMax without
    kept dimensions read as [N, C]."""
    b = Builder(83, opset=18)
    hw = b.const(np.array([2, 3], np.int64), "hw")
    y = b.conv_bn("x", 8, 32, 3)
    g = b.node("ReduceL2", [y, hw], keepdims=1)
    n = b.node("Div", [g, b.node("Add", [b.node("ReduceMean", [g, b.const(np.array([1], np.int64), "c")], keepdims=1),
                                         b.const(np.float32(1e-6), "eps")])])
    gamma = b.const((0.5 * b.rng.standard_normal((1, 32, 1, 1))).astype(np.float32), "gamma")
    y = b.node("Add", [y, b.node("Mul", [gamma, b.node("Mul", [y, n])])])
    for op in ("ReduceMax", "ReduceMin", "ReduceSum", "ReduceL1", "ReduceSumSquare"):
        gate = b.node("Sigmoid", [b.node(op, [y, hw], keepdims=1)])
        y = b.node("Mul", [y, gate])
    y = b.node("Mul", [y, b.node("Tanh", [b.node("GlobalMaxPool", [y])])])
    z = b.conv_bn(y, 32, 24, 1)
    z = b.node("Mul", [z, b.node("Sigmoid", [b.node("ReduceMin", [z, hw], keepdims=1)])])
    z = b.node("Mul", [z, b.node("Sigmoid", [b.node("ReduceL2", [z, hw], keepdims=1)])])
    out = b.conv_bn(z, 24, 16, 1, act=None)
    flat = b.node("ReduceMax", [y, hw], keepdims=0)
    return b.model("spatial_reductions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 10, 10])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 16, 10, 10]),
                    helper.make_tensor_value_info(flat, TensorProto.FLOAT, [1, 32])], ir_version=None)


def segmentation_heads():
    """A segmentation head's bilinear upsampling of its class scores to the image, in NCHW (21
    classes, no vector block): 8x (half_pixel, by sizes), and by align_corners to a size that is
    no multiple of the input's."""
    b = Builder(89, opset=18)
    size = b.const(np.array([1, 21, 64, 64], np.int64), "sizes")
    up = b.node("Resize", ["scores", "", "", size], mode="linear", coordinate_transformation_mode="half_pixel")
    odd = b.const(np.array([1, 21, 30, 17], np.int64), "odd")
    corners = b.node("Resize", ["scores", "", "", odd], mode="linear", coordinate_transformation_mode="align_corners")
    return b.model("segmentation_heads", [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 21, 8, 8])],
                   [helper.make_tensor_value_info(up, TensorProto.FLOAT, [1, 21, 64, 64]),
                    helper.make_tensor_value_info(corners, TensorProto.FLOAT, [1, 21, 30, 17])], ir_version=None)


def ghost_modules():
    """GhostNet's modules: a 1x1 convolution to half the channels and a depthwise 3x3 of its
    output, concatenated (8 + 8, then 24 + 24), read by the next convolution in blocks of 16."""
    b = Builder(97, opset=18)
    y = "x"
    for cin, half in ((16, 8), (16, 24)):
        primary = b.conv_bn(y, cin, half, 1)
        cheap = b.conv_bn(primary, half, half, 3, groups=half)
        y = b.node("Concat", [primary, cheap], axis=1)
    y = b.conv_bn(y, 48, 16, 1, act=None)
    return b.model("ghost_modules", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 10, 10])],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, 16, 10, 10])], ir_version=None)


def atrous_pyramid():
    """DeepLabV3's atrous spatial pyramid over a small map: 3x3 convolutions over 160 channels at
    rates 12 and 6 over 16x16 (most taps reading padding: run by region) and 2 (run whole), the
    branches summed."""
    b = Builder(101, opset=17)
    branches = []
    for rate in (12, 6, 2):
        y = b.node("Conv", ["x", b.weight((160, 160, 3, 3), 1440), b.const(np.full(160, 0.1, np.float32), "bias")],
                   kernel_shape=[3, 3], dilations=[rate, rate], pads=[rate] * 4)
        branches.append(b.node("Relu", [y]))
    out = b.node("Sum", branches)
    return b.model("atrous_pyramid", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 160, 16, 16])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 160, 16, 16])], ir_version=None)


def video_convolutions():
    """Video networks' 3-D convolutions over a clip of 6 frames (R3D, R(2+1)D): 3x3x3 with padding
    and its batch norm, R(2+1)D's 1x3x3 at stride (1, 2, 2) and 3x1x1 at stride (2, 1, 1), a
    grouped 3x3x3, a residual Add, and the mean over the clip; a 3-D U-Net's pooling and
    resizing."""
    b = Builder(103, opset=17)

    def conv3d(x, cin, cout, k, stride=(1, 1, 1), pad=(0, 0, 0), groups=1):
        w = b.weight((cout, cin // groups) + k, cin // groups * int(np.prod(k)))
        return b.node("Conv", [x, w, b.const(np.full(cout, 0.05, np.float32), "bias")], kernel_shape=list(k), strides=list(stride),
                      pads=list(pad) * 2, group=groups)

    y = conv3d("clip", 3, 16, (3, 3, 3), pad=(1, 1, 1))
    y = b.node("BatchNormalization", [y, b.const((1 + 0.1 * b.rng.standard_normal(16)).astype(np.float32), "bn_scale"),
                                      b.const((0.1 * b.rng.standard_normal(16)).astype(np.float32), "bn_bias"),
                                      b.const((0.1 * b.rng.standard_normal(16)).astype(np.float32), "bn_mean"),
                                      b.const((1 + 0.1 * b.rng.random(16)).astype(np.float32), "bn_var")], epsilon=1e-5)
    y = b.node("Relu", [y])
    z = b.node("Relu", [conv3d(y, 16, 16, (1, 3, 3), stride=(1, 2, 2), pad=(0, 1, 1))])
    z = b.node("Relu", [conv3d(z, 16, 32, (3, 1, 1), stride=(2, 1, 1), pad=(1, 0, 0))])
    g = conv3d(z, 32, 32, (3, 3, 3), pad=(1, 1, 1), groups=4)
    z = b.node("Relu", [b.node("Add", [z, g])])
    out = b.node("ReduceMean", [z], axes=[2, 3, 4], keepdims=0)
    # A 3-D U-Net's pooling and upsampling: 2x2x2 max pooling, S3D's 3x3x3 at stride 1 padded in
    # depth, an average over 2x2x2, then nearest and trilinear resizing back.
    p = b.node("MaxPool", [y], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    p = b.node("MaxPool", [p], kernel_shape=[3, 3, 3], strides=[1, 1, 1], pads=[1, 1, 1, 1, 1, 1])
    a = b.node("AveragePool", [y], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    up = b.node("Resize", [b.node("Add", [p, a]), "", b.const(np.array([1, 1, 2, 2, 2], np.float32), "scales")], mode="nearest")
    smooth = b.node("Resize", [a, "", "", b.const(np.array([1, 16, 6, 12, 12], np.int64), "sizes")], mode="linear")
    unet = b.node("Concat", [up, smooth, y], axis=1)
    return b.model("video_convolutions", [helper.make_tensor_value_info("clip", TensorProto.FLOAT, [1, 3, 6, 12, 12])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 32]),
                    helper.make_tensor_value_info(unet, TensorProto.FLOAT, [1, 48, 6, 12, 12])], ir_version=None)


def opt_embeddings():
    """OPT's and Bloom's inputs as the TorchScript exporter writes them (opset 17): token embeddings
    by Gather, learned positions from the attention mask by CumSum (positions = cumsum(mask) * mask
    - 1, plus OPT's offset of 2) and Gather, RoBERTa's token types at those positions, then LayerNorm; and a running sum from the end,
    exclusive, of the normalized features (CumSum's reverse and exclusive)."""
    b = Builder(31, opset=17)
    tokens, hidden, vocab = 7, 16, 50
    ids, mask = "input_ids", "attention_mask"
    x = b.node("Gather", [b.weight((vocab, hidden), 1), ids], axis=0)
    counted = b.node("CumSum", [mask, b.const(np.int64(1), "axis")])
    positions = b.node("Sub", [b.node("Mul", [counted, mask]), b.const(np.int64(1), "one")])
    positions = b.node("Add", [positions, b.const(np.int64(2), "offset")])
    x = b.node("Add", [x, b.node("Gather", [b.weight((tokens + 2, hidden), 1), positions], axis=0)])
    # RoBERTa's token types (dynamo exporter): a buffer longer than the sequence read by
    # GatherElements at those positions, then looked up in their own table.
    types = b.const(b.rng.integers(0, 2, (1, tokens + 5)).astype(np.int64), "token_types")
    x = b.node("Add", [x, b.node("Gather", [b.weight((2, hidden), 1), b.node("GatherElements", [types, positions], axis=1)], axis=0)])
    h = b.layer_norm(x, hidden, eps=1e-5)
    tail = b.node("CumSum", [h, b.const(np.int64(-1), "axis")], exclusive=1, reverse=1)
    out = b.node("Add", [h, b.node("Mul", [tail, b.const(np.float32(0.1), "scale")])])
    return b.model("opt_embeddings", [helper.make_tensor_value_info(ids, TensorProto.INT64, [1, tokens]),
                                      helper.make_tensor_value_info(mask, TensorProto.INT64, [1, tokens])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, tokens, hidden])], ir_version=None)


def attention_operator(opset):
    """The Attention operator of opset 23 (scaled_dot_product_attention as one node), as exporters
    that fuse it write it: 3-D Q, K and V (heads in attributes) with grouped-query attention (4
    query heads over 2 KV heads) and is_causal, then 4-D ones with a boolean padding mask computed
    from an input and an explicit scale, then 4-D with a float mask added, with a boolean mask that
    is an input of the model, and with a constant one under which a query attends no key (its
    output is 0)."""
    b = Builder(29, opset=opset)
    tokens, hidden, heads, kv_heads = 6, 16, 4, 2
    head_dim = hidden // heads
    x, keep = "x", "attention_mask"
    q = b.node("MatMul", [x, b.weight((hidden, hidden), hidden)])
    k = b.node("MatMul", [x, b.weight((hidden, kv_heads * head_dim), hidden)])
    v = b.node("MatMul", [x, b.weight((hidden, kv_heads * head_dim), hidden)])
    y = b.node("Attention", [q, k, v], q_num_heads=heads, kv_num_heads=kv_heads, is_causal=1)
    h = b.node("Transpose", [b.node("Reshape", [y, b.const(np.array([1, tokens, heads, head_dim], np.int64), "shape")])],
               perm=[0, 2, 1, 3])
    # Each query row spelled out (ONNX Runtime's opset-23 kernel does not broadcast the mask over the queries).
    mask = b.node("Expand", [b.node("Unsqueeze", [keep, b.const(np.array([1, 2], np.int64), "axes")]),
                             b.const(np.array([1, 1, tokens, tokens], np.int64), "shape")])
    mask = b.node("Cast", [mask], to=TensorProto.BOOL)
    h = b.node("Attention", [h, h, h, mask], scale=0.3)
    bias = b.const((0.5 * b.rng.standard_normal((1, 1, tokens, tokens))).astype(np.float32), "bias")
    h = b.node("Attention", [h, h, h, bias])
    h = b.node("Attention", [h, h, h, "key_mask"])
    hidden_keys = b.rng.random((1, 1, tokens, tokens)) < 0.7
    hidden_keys[..., 2, :] = False
    h = b.node("Attention", [h, h, h, b.const(hidden_keys, "hidden_keys")])
    out = b.node("Reshape", [b.node("Transpose", [h], perm=[0, 2, 1, 3]), b.const(np.array([1, tokens, hidden], np.int64), "shape")])
    return b.model(f"attention_operator_opset{opset}",
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, tokens, hidden]),
                    helper.make_tensor_value_info(keep, TensorProto.INT64, [1, tokens]),
                    helper.make_tensor_value_info("key_mask", TensorProto.BOOL, [1, 1, tokens, tokens])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, tokens, hidden])], ir_version=None)


def vision_operators(opset):
    """Operators of detection, segmentation and older classification networks: DenseNet's
    BatchNormalization before ReLU (no convolution to fold it into) and its 2x2 AveragePool,
    Inception's 3x3 AveragePool at stride 1 (padding not counted), YOLO's nearest 2x Resize (by
    scales) and Concat with an earlier map, a segmentation head's bilinear Resize to a size
    (half_pixel, and align_corners), bicubic Resize (PyTorch's and TensorFlow's), SRGAN's PRelu and pixel shuffle (DepthToSpace, CRD), ELU, SELU,
    Sum of three, Tile, the max of three, GroupNorm as the TorchScript exporter writes it (Reshape
    to groups, InstanceNormalization, Reshape back, Mul and Add per channel), ConvTranspose (U-Net's
    2x2 at stride 2, DCGAN's 4x4 at stride 2 with padding), Softplus, Log and a LogSoftmax head;
    from opset 21 also the GroupNormalization operator."""
    b = Builder(23, opset=opset)
    x = "input"
    y = b.conv_bn(x, 3, 16, 3)
    # Pre-activation: the batch norm reads the Add, not a convolution.
    z = b.node("Add", [y, b.conv_bn(y, 16, 16, 3, act=None)])
    z = b.node("BatchNormalization", [z, b.const((1 + 0.1 * b.rng.standard_normal(16)).astype(np.float32), "bn_scale"),
                                      b.const((0.1 * b.rng.standard_normal(16)).astype(np.float32), "bn_bias"),
                                      b.const((0.1 * b.rng.standard_normal(16)).astype(np.float32), "bn_mean"),
                                      b.const((1 + 0.1 * b.rng.random(16)).astype(np.float32), "bn_var")], epsilon=1e-5)
    z = b.node("Relu", [z])
    down = b.node("AveragePool", [z], kernel_shape=[2, 2], strides=[2, 2])
    pooled = b.node("AveragePool", [down], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=0)
    up = b.node("Resize", [pooled, b.const(np.zeros(0, np.float32), "roi"), b.const(np.array([1, 1, 2, 2], np.float32), "scales")],
                mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    y = b.node("Concat", [up, z], axis=1)
    y = b.node("PRelu", [b.conv_bn(y, 32, 16, 1, act=None), b.const(np.full((16, 1, 1), 0.2, np.float32), "slope")])
    y = b.node("DepthToSpace", [y], blocksize=2, mode="CRD")
    y = b.node("Elu", [b.node("Selu", [y])])
    y = b.conv_bn(y, 4, 8, 3, stride=2)
    size = b.const(np.array([1, 8, 11, 13], np.int64), "sizes")
    wide = b.node("Resize", [y, "", "", size], mode="linear", coordinate_transformation_mode="half_pixel")
    corners = b.node("Resize", [y, "", "", size], mode="linear", coordinate_transformation_mode="align_corners")
    y = b.node("Sum", [wide, corners, b.node("Tile", [b.node("Slice", [wide, b.const(np.array([0], np.int64), "s"),
                                                                          b.const(np.array([4], np.int64), "e"),
                                                                          b.const(np.array([1], np.int64), "a")]),
                                                     b.const(np.array([1, 2, 1, 1], np.int64), "repeats")])])
    # Bicubic as PyTorch exports it (a = -0.75, edges repeated) and as TensorFlow's (a = -0.5, the
    # inputs past the edge left out).
    cubic = b.node("Resize", [y, "", "", size], mode="cubic", coordinate_transformation_mode="half_pixel")
    tf_cubic = b.node("Resize", [y, "", "", size], mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1,
                      coordinate_transformation_mode="pytorch_half_pixel")
    y = b.node("Max", [y, wide, corners, cubic, tf_cubic])
    # GroupNorm (2 groups of 4 channels) as the TorchScript exporter writes it, and from opset 21 as
    # the GroupNormalization operator (onnx's checker refuses opset 18's form, deprecated in 21).
    g = b.node("Reshape", [y, b.const(np.array([1, 2, -1], np.int64), "shape")])
    g = b.node("InstanceNormalization", [g, b.const(np.array([1.1, 0.9], np.float32), "ones"),
                                         b.const(np.array([0.1, -0.1], np.float32), "zeros")], epsilon=1e-5)
    g = b.node("Reshape", [g, b.const(np.array([1, 8, 11, 13], np.int64), "shape")])
    y = b.node("Add", [b.node("Mul", [g, b.const((1 + 0.1 * b.rng.standard_normal((8, 1, 1))).astype(np.float32), "gn_weight")]),
                       b.const((0.1 * b.rng.standard_normal((8, 1, 1))).astype(np.float32), "gn_bias")])
    if opset >= 21:
        y = b.node("GroupNormalization", [y, b.const((1 + 0.1 * b.rng.standard_normal(8)).astype(np.float32), "gn_scale"),
                                          b.const((0.1 * b.rng.standard_normal(8)).astype(np.float32), "gn_bias")],
                   num_groups=2, epsilon=1e-5)
    # U-Net's 2x2 up-convolution, then DCGAN's 4x4 at stride 2 (its windows overlap).
    y = b.node("ConvTranspose", [y, b.weight((8, 4, 2, 2), 32), b.const(np.full(4, 0.1, np.float32), "bias")],
               kernel_shape=[2, 2], strides=[2, 2])
    y = b.node("ConvTranspose", [y, b.weight((4, 8, 4, 4), 64)], kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1])
    y = b.node("Log", [b.node("Add", [b.node("Softplus", [y]), b.const(np.float32(0.5), "half")])])
    out = b.node("LogSoftmax", [b.head(y, 8, 10)], axis=-1)
    return b.model(f"vision_operators_opset{opset}",
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 16, 16])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 10])], ir_version=None)


def efficientnet_b0():
    """EfficientNet-B0 as torchvision builds it (224x224, random weights, opset 17): MBConv blocks
    of 1x1 expansion, 3x3 or 5x5 depthwise (stride 1 or 2), squeeze-excitation (GlobalAveragePool,
    1x1 convolutions with SiLU, Sigmoid gate, Mul over channels) and 1x1 projection, SiLU as
    x * Sigmoid(x) after every convolution but the projections."""
    b = Builder(80, opset=17)
    x = "input"
    y = silu(b, b.conv_bn(x, 3, 32, 3, stride=2, act=None))
    cin = 32
    # (expansion, kernel, stride, channels out, repeats) as in the EfficientNet paper.
    for t, k, s, c, n in [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3), (6, 5, 1, 112, 3),
                          (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            z = y if t == 1 else silu(b, b.conv_bn(y, cin, hidden, 1, act=None))
            z = silu(b, b.conv_bn(z, hidden, hidden, k, stride=stride, groups=hidden, act=None))
            z = squeeze_excite(b, z, hidden, max(1, cin // 4), gate="Sigmoid", act="SiLU")
            z = b.conv_bn(z, hidden, c, 1, act=None)
            y = b.node("Add", [y, z]) if stride == 1 and cin == c else z
            cin = c
    y = silu(b, b.conv_bn(y, cin, 1280, 1, act=None))
    out = b.head(y, 1280, 1000)
    return b.model("efficientnet_b0", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1000])])


# (kernel, expanded, out, squeeze-excitation, activation, stride) of each block, from the MobileNetV3
# paper; then the last convolution's and the classifier's hidden widths.
MOBILENET_V3 = {
    "small": ([(3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2), (3, 88, 24, False, "RE", 1),
               (5, 96, 40, True, "HS", 2), (5, 240, 40, True, "HS", 1), (5, 240, 40, True, "HS", 1),
               (5, 120, 48, True, "HS", 1), (5, 144, 48, True, "HS", 1), (5, 288, 96, True, "HS", 2),
               (5, 576, 96, True, "HS", 1), (5, 576, 96, True, "HS", 1)], 576, 1024),
    "large": ([(3, 16, 16, False, "RE", 1), (3, 64, 24, False, "RE", 2), (3, 72, 24, False, "RE", 1),
               (5, 72, 40, True, "RE", 2), (5, 120, 40, True, "RE", 1), (5, 120, 40, True, "RE", 1),
               (3, 240, 80, False, "HS", 2), (3, 200, 80, False, "HS", 1), (3, 184, 80, False, "HS", 1),
               (3, 184, 80, False, "HS", 1), (3, 480, 112, True, "HS", 1), (3, 672, 112, True, "HS", 1),
               (5, 672, 160, True, "HS", 2), (5, 960, 160, True, "HS", 1), (5, 960, 160, True, "HS", 1)], 960, 1280),
}


def mobilenet_v3(size, seed):
    """MobileNetV3 (Small or Large) as torchvision builds it (224x224, random weights, opset 17):
    HardSwish and ReLU blocks with 3x3 and 5x5 depthwise convolutions, squeeze-excitation through
    HardSigmoid, and a HardSwish classifier."""
    blocks, last, hidden = MOBILENET_V3[size]
    b = Builder(seed, opset=17)
    divisible = lambda v: max(8, int(v + 4) // 8 * 8) + (8 if max(8, int(v + 4) // 8 * 8) < 0.9 * v else 0)
    act = lambda name, z: hardswish(b, z) if name == "HS" else b.node("Relu", [z])
    x = "input"
    y = hardswish(b, b.conv_bn(x, 3, 16, 3, stride=2, act=None))
    cin = 16
    for k, e, c, se, a, s in blocks:
        z = y if e == cin else act(a, b.conv_bn(y, cin, e, 1, act=None))
        z = act(a, b.conv_bn(z, e, e, k, stride=s, groups=e, act=None))
        if se:
            z = squeeze_excite(b, z, e, divisible(e // 4))
        z = b.conv_bn(z, e, c, 1, act=None)
        y = b.node("Add", [y, z]) if s == 1 and cin == c else z
        cin = c
    y = hardswish(b, b.conv_bn(y, cin, last, 1, act=None))
    y = b.node("Flatten", [b.node("GlobalAveragePool", [y])], axis=1)
    y = hardswish(b, b.node("Gemm", [y, b.weight((hidden, last), last), b.const(np.zeros(hidden, np.float32), "fc_bias")], transB=1))
    out = b.node("Gemm", [y, b.weight((1000, hidden), hidden), b.const(np.zeros(1000, np.float32), "fc_bias")], transB=1)
    return b.model(f"mobilenet_v3_{size}", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1000])])


def mobilenet_v3_small():
    return mobilenet_v3("small", 33)


def mobilenet_v3_large():
    return mobilenet_v3("large", 34)


def save_with_external_data(model, path):
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True,
              location=os.path.basename(path) + ".data", size_threshold=256)


def exporter_patterns(out_dir):
    newest = onnx.defs.onnx_opset_version()
    for opset in range(13, newest + 1):
        path = os.path.join(out_dir, f"mobilenet_v3_block_opset{opset}.onnx")
        save_with_external_data(mobilenet_v3_block(opset), path)
        print(path)
    # The operators' patterns at the opsets of the TorchScript exporter (13, 17) and of the dynamo
    # exporter (18, 20), and the newest.
    for make in (convnet_blocks, transformer_blocks, vision_operators):
        for opset in sorted({13, 17, 18, 20, newest}):
            model = make(opset)
            path = os.path.join(out_dir, model.graph.name + ".onnx")
            save_with_external_data(model, path)
            print(path)
    for model in (convnext_stages(small=True), gpt2_block(small=True), llama_block(small=True, opset=17),
                  llama_block(small=True, opset=18), attention_operator(23), attention_operator(newest),
                  opt_embeddings(), audio_front_ends(17), audio_front_ends(21), rounding(), argmax_heads(),
                  tf_convolutions(), padding_modes(), reductions(), yolo_head(), symbolic_sizes(), mix_ffn(), zoo_operators(),
                  view_outputs(), recurrent(), broadcast_matmuls(), timm_convolutions(), spatial_reductions(),
                  segmentation_heads(), ghost_modules(), atrous_pyramid(), video_convolutions()):
        path = os.path.join(out_dir, model.graph.name + ".onnx")
        save_with_external_data(model, path)
        print(path)
    return 0


MODELS = {"resnet50": resnet50, "mobilenet_v2": mobilenet_v2, "bert_layer": bert_layer,
          # The same layer as exporters write it at opset 17: LayerNormalization as one operator,
          # constants as Constant nodes, linear weights behind Transpose nodes.
          "bert_layer_opset17": lambda small: bert_layer(small, opset=17),
          # Transformer layers in the shapes of models nobody here tuned for.
          "vit_block": vit_block, "minilm_layer": minilm_layer}


def convnext_stages(small=True):
    """ConvNeXt-T's first two stages as torchvision builds them (opset 17): a 4x4 stride-4 stem,
    LayerNorm2d (Transpose to channels-last, LayerNormalization, Transpose back), blocks of a 7x7
    depthwise convolution, channels-last LayerNorm, Linear to 4x, GELU (erf), Linear back,
    Transpose to NCHW, the layer scale (Mul by [C, 1, 1]) and the residual Add; LayerNorm2d and a
    2x2 stride-2 convolution between the stages. Small: 32x32, 16 and 32 channels, one block per
    stage; else 224x224, 96 and 192 channels, three blocks each."""
    b = Builder(7, opset=17)
    size, widths, depth = (32, (16, 32), 1) if small else (224, (96, 192), 3)

    def layer_norm_2d(x, c):
        y = b.layer_norm(b.node("Transpose", [x], perm=[0, 2, 3, 1]), c, eps=1e-6)
        return b.node("Transpose", [y], perm=[0, 3, 1, 2])

    def block(x, c):
        y = b.node("Conv", [x, b.weight((c, 1, 7, 7), 49), b.const(np.zeros(c, np.float32), "bias")],
                   kernel_shape=[7, 7], pads=[3] * 4, group=c)
        y = b.layer_norm(b.node("Transpose", [y], perm=[0, 2, 3, 1]), c, eps=1e-6)
        y = b.linear(b.gelu(b.linear(y, c, 4 * c)), 4 * c, c)
        y = b.node("Transpose", [y], perm=[0, 3, 1, 2])
        y = b.node("Mul", [y, b.const((0.5 + 0.1 * b.rng.standard_normal((c, 1, 1))).astype(np.float32), "layer_scale")])
        return b.node("Add", [y, x])

    x = "input"
    y = b.node("Conv", [x, b.weight((widths[0], 3, 4, 4), 48), b.const(np.zeros(widths[0], np.float32), "bias")],
               kernel_shape=[4, 4], strides=[4, 4])
    y = layer_norm_2d(y, widths[0])
    for stage, c in enumerate(widths):
        if stage > 0:
            y = layer_norm_2d(y, widths[stage - 1])
            y = b.node("Conv", [y, b.weight((c, widths[stage - 1], 2, 2), 4 * widths[stage - 1]),
                                b.const(np.zeros(c, np.float32), "bias")], kernel_shape=[2, 2], strides=[2, 2])
        for _ in range(depth):
            y = block(y, c)
    out = b.head(y, widths[-1], 1000 if not small else 10)
    return b.model("convnext_stages" + ("_small" if small else ""),
                   [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, size, size])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1000 if not small else 10])])


def zoo_operators():
    """Operators of the ONNX model zoo's classic networks and of less common activations (opset 12):
    LRN across channels after a convolution and ReLU (bvlc GoogLeNet's and AlexNet's: size 5, beta
    0.75; then a window of 3 and another beta, alpha large enough that the window matters),
    Celu, Shrink, Softsign and ThresholdedRelu."""
    b = Builder(73, opset=12)
    y = b.node("Relu", [b.node("Conv", ["x", b.weight((16, 3, 3, 3), 27)], kernel_shape=[3, 3], pads=[1] * 4)])
    y = b.node("LRN", [y], size=5, alpha=0.5, beta=0.75, bias=1.0)
    y = b.node("LRN", [y], size=3, alpha=0.3, beta=0.6, bias=2.0)
    outs = [y, b.node("Celu", [y], alpha=0.7), b.node("Shrink", ["x"], lambd=0.3, bias=0.1), b.node("Softsign", ["x"]),
            b.node("ThresholdedRelu", ["x"], alpha=0.2)]
    shapes = [[1, 16, 8, 8], [1, 16, 8, 8], [1, 3, 8, 8], [1, 3, 8, 8], [1, 3, 8, 8]]
    return b.model("zoo_operators", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                   [helper.make_tensor_value_info(o, TensorProto.FLOAT, s) for o, s in zip(outs, shapes)])


def mix_ffn():
    """SegFormer's Mix-FFN as the dynamo exporter writes it (opset 18): tokens [1, H*W, C] through a
    Linear, Transpose to [1, 4C, H*W], Reshape to the map, a 3x3 depthwise convolution, Reshape back
    to [1, 4C, H*W], Transpose to tokens, GELU (erf), a Linear back and the residual Add; and its
    attention's spatial reduction: the tokens to the map the same way, a 2x2 stride-2 convolution,
    back to tokens and LayerNorm. An 8x8 map of 16 channels."""
    b = Builder(71, opset=18)
    side, c = 8, 16
    x = "tokens"

    def to_map(t, channels):
        t = b.node("Transpose", [t], perm=[0, 2, 1])
        return b.node("Reshape", [t, b.const(np.array([1, channels, side, side], np.int64), "map")])

    def to_tokens(t, channels, count):
        t = b.node("Reshape", [t, b.const(np.array([1, channels, count], np.int64), "flat")])
        return b.node("Transpose", [t], perm=[0, 2, 1])

    h = to_map(b.linear(x, c, 4 * c), 4 * c)
    h = b.node("Conv", [h, b.weight((4 * c, 1, 3, 3), 9), b.const(np.zeros(4 * c, np.float32), "bias")],
               kernel_shape=[3, 3], pads=[1] * 4, group=4 * c)
    y = b.node("Add", [b.linear(b.gelu(to_tokens(h, 4 * c, side * side)), 4 * c, c), x])
    r = b.node("Conv", [to_map(y, c), b.weight((c, c, 2, 2), 4 * c), b.const(np.zeros(c, np.float32), "bias")],
               kernel_shape=[2, 2], strides=[2, 2])
    r = b.layer_norm(to_tokens(r, c, side * side // 4), c, eps=1e-6)
    return b.model("mix_ffn", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, side * side, c])],
                   [helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, side * side, c]),
                    helper.make_tensor_value_info(r, TensorProto.FLOAT, [1, side * side // 4, c])], ir_version=None)


def gpt2_block(small=True):
    """A GPT-2 block as the TorchScript exporter writes Hugging Face's GPT2Block (opset 17): pre-norm,
    Conv1D layers (the rows flattened by Reshape, a Gemm with the weight as [in, out], reshaped
    back), Q, K and V by Split, the causal mask a Slice of a constant lower-triangular buffer applied
    by Where with float32's lowest, gelu_new (GELU's tanh approximation written out with Pow and
    Tanh). Small: 8 tokens of 32, 2 heads; else 128 tokens of 768, 12 heads."""
    b = Builder(2, opset=17)
    tokens, hidden, heads = (8, 32, 2) if small else (128, 768, 12)
    head_dim = hidden // heads
    x = "hidden_states"

    def conv1d(t, fin, fout):
        rows = b.node("Reshape", [t, b.const(np.array([-1, fin], np.int64), "shape")])
        y = b.node("Gemm", [rows, b.weight((fin, fout), fin), b.const((0.02 * b.rng.standard_normal(fout)).astype(np.float32), "bias")])
        return b.node("Reshape", [y, b.const(np.array([1, tokens, fout], np.int64), "shape")])

    def split_heads(t):
        t = b.node("Reshape", [t, b.const(np.array([1, tokens, heads, head_dim], np.int64), "shape")])
        return b.node("Transpose", [t], perm=[0, 2, 1, 3])

    qkv = conv1d(b.layer_norm(x, hidden, eps=1e-5), hidden, 3 * hidden)
    q, k, v = (split_heads(t) for t in b.node("Split", [qkv, b.const(np.array([hidden] * 3, np.int64), "split")], outputs=3, axis=2))
    scores = b.node("MatMul", [q, b.node("Transpose", [k], perm=[0, 1, 3, 2])])
    scores = b.node("Div", [scores, b.const(np.float32(head_dim ** 0.5), "scale")])
    causal = b.const(np.tril(np.ones((1, 1, 4 * tokens, 4 * tokens), bool)), "causal")
    causal = b.node("Slice", [causal, b.const(np.array([0, 0], np.int64), "starts"), b.const(np.array([tokens, tokens], np.int64), "ends"),
                              b.const(np.array([2, 3], np.int64), "axes")])
    scores = b.node("Where", [causal, scores, b.const(np.float32(np.finfo(np.float32).min), "lowest")])
    context = b.node("Transpose", [b.node("MatMul", [b.node("Softmax", [scores], axis=-1), v])], perm=[0, 2, 1, 3])
    context = b.node("Reshape", [context, b.const(np.array([1, tokens, hidden], np.int64), "shape")])
    y = b.node("Add", [conv1d(context, hidden, hidden), x])
    h = conv1d(b.layer_norm(y, hidden, eps=1e-5), hidden, 4 * hidden)
    inner = b.node("Add", [h, b.node("Mul", [b.node("Pow", [h, b.const(np.float32(3.0), "three")]), b.const(np.float32(0.044715), "c")])])
    t = b.node("Tanh", [b.node("Mul", [inner, b.const(np.float32(np.sqrt(2 / np.pi)), "c")])])
    h = b.node("Mul", [b.node("Mul", [h, b.const(np.float32(0.5), "half")]), b.node("Add", [t, b.const(np.float32(1.0), "one")])])
    out = b.node("Add", [y, conv1d(h, 4 * hidden, hidden)])
    return b.model("gpt2_block" + ("_small" if small else ""), [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, tokens, hidden])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, tokens, hidden])])


def densenet121_blocks():
    """DenseNet-121's first half as torchvision builds it (224x224, random weights, opset 17): the
    7x7 stem with its pooling, the first dense block (6 layers) and its transition, the second
    (12 layers); each layer BatchNorm -> ReLU -> 1x1 convolution to 128 -> BatchNorm -> ReLU -> 3x3
    convolution to 32, concatenated to its input; the transition BatchNorm -> ReLU -> 1x1
    convolution halving the channels -> 2x2 average pooling. Pre-activation: each layer's first
    batch norm reads the concatenation, not a convolution."""
    b = Builder(121, opset=17)

    def bn_relu(x, c):
        y = b.node("BatchNormalization", [x, b.const((1 + 0.1 * b.rng.standard_normal(c)).astype(np.float32), "bn_scale"),
                                          b.const((0.1 * b.rng.standard_normal(c)).astype(np.float32), "bn_bias"),
                                          b.const((0.1 * b.rng.standard_normal(c)).astype(np.float32), "bn_mean"),
                                          b.const((1 + 0.1 * b.rng.random(c)).astype(np.float32), "bn_var")], epsilon=1e-5)
        return b.node("Relu", [y])

    def conv(x, cin, cout, k):
        return b.node("Conv", [x, b.weight((cout, cin, k, k), cin * k * k)], kernel_shape=[k, k], pads=[k // 2] * 4)

    x = "input"
    y = b.conv_bn(x, 3, 64, 7, stride=2)
    y = b.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c = 64
    for stage, layers in enumerate((6, 12)):
        for _ in range(layers):
            z = conv(bn_relu(conv(bn_relu(y, c), c, 128, 1), 128), 128, 32, 3)
            y = b.node("Concat", [y, z], axis=1)
            c += 32
        if stage == 0:
            y = b.node("AveragePool", [conv(bn_relu(y, c), c, c // 2, 1)], kernel_shape=[2, 2], strides=[2, 2])
            c //= 2
    out = b.head(bn_relu(y, c), c, 1000)
    return b.model("densenet121_blocks", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1000])])


def resnet18_160():
    """ResNet-18 at 160x160 (random weights): basic blocks of two 3x3 convolutions, the last stage's
    512-channel 3x3 convolutions on 5x5 maps."""
    b = Builder(18)
    x = "input"
    y = b.conv_bn(x, 3, 64, 7, stride=2)
    y = b.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, width in enumerate([64, 128, 256, 512]):
        for i in range(2):
            stride = 2 if i == 0 and stage > 0 else 1
            shortcut = y if stride == 1 and cin == width else b.conv_bn(y, cin, width, 1, stride=stride, act=None)
            z = b.conv_bn(y, cin, width, 3, stride=stride)
            z = b.conv_bn(z, width, width, 3, act=None)
            y = b.node("Relu", [b.node("Add", [z, shortcut])])
            cin = width
    out = b.head(y, 512, 1000)
    return b.model("resnet18_160", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 160, 160])],
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, 1000])])


def llama_block(small=True, opset=17):
    """A LLaMA-style decoder layer (Llama, Mistral, Qwen) as the TorchScript exporter writes Hugging
    Face's LlamaDecoderLayer (opset 17): token ids in, the embedding a Gather; RMSNorm written out
    (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul by the weight); Q, K, V by MatMul without bias;
    rotary position embedding (cos and sin tables picked by Gather on position ids, rotate_half by
    two Slices, Neg and Concat); grouped-query attention (K and V heads repeated by Unsqueeze, Expand
    and Reshape); a causal mask built by Trilu and added; SiLU-gated MLP (Sigmoid, Mul, Mul).
    Small: 8 tokens of 32, 4 heads, 2 KV heads, MLP 64; else 128 tokens of 512, 8 heads, 2 KV heads,
    MLP 1408 (a TinyLlama-sized width).

    At opset 18, as the dynamo exporter writes the current LlamaModel: the rotary tables computed at
    run time from the position ids (Cast, MatMul by the inverse frequencies, Concat, Cos, Sin), the
    mask from an attention_mask input (the causal constant plus the padding: Unsqueeze, Cast, Add,
    Equal, Where), and scaled_dot_product_attention decomposed with the square root of the scale
    multiplied into Q and into K transposed."""
    b = Builder(3, opset=opset)
    dynamo = opset >= 18
    tokens, hidden, heads, kv_heads, ffn, vocab = (8, 32, 4, 2, 64, 100) if small else (128, 512, 8, 2, 1408, 2000)
    head_dim = hidden // heads
    ids, positions, attention = "input_ids", "position_ids", "attention_mask"

    def rms_norm(t):
        variance = b.reduce("ReduceMean", b.node("Pow", [t, b.const(np.float32(2.0), "two")]), [-1])
        inv = b.node("Reciprocal", [b.node("Sqrt", [b.node("Add", [variance, b.const(np.float32(1e-6), "eps")])])])
        weight = b.const((1 + 0.1 * b.rng.standard_normal(hidden)).astype(np.float32), "rms_weight")
        return b.node("Mul", [weight, b.node("Mul", [t, inv])])

    def proj(t, fin, fout):
        return b.node("MatMul", [t, b.weight((fin, fout), fin)])

    def heads_of(t, n):
        t = b.node("Reshape", [t, b.const(np.array([1, tokens, n, head_dim], np.int64), "shape")])
        return b.node("Transpose", [t], perm=[0, 2, 1, 3])

    inv_freq = 1.0 / (10000 ** (np.arange(0, head_dim, 2) / head_dim))
    angles = np.outer(np.arange(4 * tokens), inv_freq)
    angles = np.concatenate([angles, angles], axis=-1)
    if dynamo:
        inverse = b.const(inv_freq.astype(np.float32).reshape(1, -1, 1), "inv_freq")
        where = b.node("Unsqueeze", [b.node("Cast", [positions], to=TensorProto.FLOAT), b.const(np.array([1], np.int64), "axes")])
        freqs = b.node("Transpose", [b.node("MatMul", [inverse, where])], perm=[0, 2, 1])
        emb = b.node("Concat", [freqs, freqs], axis=-1)
        cos, sin = (b.node("Unsqueeze", [b.node(op, [emb]), b.const(np.array([1], np.int64), "axes")]) for op in ("Cos", "Sin"))
    else:
        cos = b.node("Unsqueeze", [b.node("Gather", [b.const(np.cos(angles).astype(np.float32), "cos_cached"), positions], axis=0),
                                   b.const(np.array([1], np.int64), "axes")])
        sin = b.node("Unsqueeze", [b.node("Gather", [b.const(np.sin(angles).astype(np.float32), "sin_cached"), positions], axis=0),
                                   b.const(np.array([1], np.int64), "axes")])

    def rotate(t):
        half = head_dim // 2
        x1 = b.node("Slice", [t, b.const(np.array([0], np.int64), "starts"), b.const(np.array([half], np.int64), "ends"),
                              b.const(np.array([3], np.int64), "axes")])
        x2 = b.node("Slice", [t, b.const(np.array([half], np.int64), "starts"),
                              b.const(np.array([np.iinfo(np.int64).max], np.int64), "ends"), b.const(np.array([3], np.int64), "axes")])
        rotated = b.node("Concat", [b.node("Neg", [x2]), x1], axis=-1)
        return b.node("Add", [b.node("Mul", [t, cos]), b.node("Mul", [rotated, sin])])

    def repeat_kv(t):
        t = b.node("Unsqueeze", [t, b.const(np.array([2], np.int64), "axes")])
        t = b.node("Expand", [t, b.const(np.array([1, kv_heads, heads // kv_heads, tokens, head_dim], np.int64), "shape")])
        return b.node("Reshape", [t, b.const(np.array([1, heads, tokens, head_dim], np.int64), "shape")])

    x = b.node("Gather", [b.weight((vocab, hidden), 1), ids], axis=0)
    h = rms_norm(x)
    q = rotate(heads_of(proj(h, hidden, hidden), heads))
    k = repeat_kv(rotate(heads_of(proj(h, hidden, kv_heads * head_dim), kv_heads)))
    v = repeat_kv(heads_of(proj(h, hidden, kv_heads * head_dim), kv_heads))
    lowest = np.finfo(np.float32).min
    full = b.node("ConstantOfShape", [b.const(np.array([tokens, tokens], np.int64), "shape")],
                  value=numpy_helper.from_array(np.array([lowest], np.float32)))
    mask = b.node("Trilu", [full, b.const(np.int64(1), "diagonal")], upper=1)
    if dynamo:
        root = b.const(np.float32(head_dim ** -0.25), "scale_root")
        scores = b.node("MatMul", [b.node("Mul", [q, root]), b.node("Mul", [b.node("Transpose", [k], perm=[0, 1, 3, 2]), root])])
        causal = b.node("Expand", [b.node("Unsqueeze", [mask, b.const(np.array([0, 1], np.int64), "axes")]),
                                   b.const(np.array([1, 1, tokens, tokens], np.int64), "shape")])
        padding = b.node("Cast", [b.node("Unsqueeze", [attention, b.const(np.array([1, 2], np.int64), "axes")])], to=TensorProto.FLOAT)
        padded = b.node("Equal", [b.node("Add", [causal, padding]), b.const(np.float32(0.0), "zero")])
        mask = b.node("Where", [padded, b.const(np.float32(lowest), "lowest"), causal])
    else:
        scores = b.node("Div", [b.node("MatMul", [q, b.node("Transpose", [k], perm=[0, 1, 3, 2])]),
                                b.const(np.float32(head_dim ** 0.5), "scale")])
    scores = b.node("Add", [scores, mask])
    probs = b.node("Softmax", [scores], axis=-1)
    context = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    context = b.node("Reshape", [context, b.const(np.array([1, tokens, hidden], np.int64), "shape")])
    y = b.node("Add", [x, proj(context, hidden, hidden)])
    h = rms_norm(y)
    gate = proj(h, hidden, ffn)
    act = b.node("Mul", [gate, b.node("Sigmoid", [gate])])
    out = b.node("Add", [y, proj(b.node("Mul", [act, proj(h, hidden, ffn)]), ffn, hidden)])
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, [1, tokens])
              for name in ([ids, attention, positions] if dynamo else [ids, positions])]
    return b.model(f"llama_block_opset{opset}" + ("_small" if small else ""), inputs,
                   [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, tokens, hidden])], ir_version=None if dynamo else 8)


# Written only when named by --only: the CNNs of today's exporters in their patterns, for
# benchmarks (bench/RESULTS.md), not for the tests.
BENCH_MODELS = {"efficientnet_b0": efficientnet_b0, "mobilenet_v3_small": mobilenet_v3_small,
                "mobilenet_v3_large": mobilenet_v3_large, "resnet18_160": resnet18_160,
                "convnext_stages": lambda: convnext_stages(small=False), "gpt2_block": lambda: gpt2_block(small=False),
                "densenet121_blocks": densenet121_blocks,
                "llama_block": lambda: llama_block(small=False), "llama_block_small": llama_block,
                "llama_block_opset18": lambda: llama_block(small=False, opset=18),
                "llama_block_opset18_small": lambda: llama_block(opset=18)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--small-only", action="store_true", help="only the small variants (for tests)")
    parser.add_argument("--only", metavar="NAME", help="only this model, e.g. bert_layer or resnet50_small")
    parser.add_argument("--exporter-patterns", action="store_true",
                        help="the models in today's exporters' patterns (needs a current onnx package)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    if args.exporter_patterns:
        return exporter_patterns(args.out_dir)
    if args.only in BENCH_MODELS:
        path = os.path.join(args.out_dir, args.only + ".onnx")
        onnx.save(BENCH_MODELS[args.only](), path)
        print(path)
        return 0
    if args.only in (None, "unbuildable_small"):
        onnx.save(unbuildable(), os.path.join(args.out_dir, "unbuildable_small.onnx"))
    if args.only in (None, "token_encoder_small"):
        onnx.save(token_encoder(), os.path.join(args.out_dir, "token_encoder_small.onnx"))
    for name, make in MODELS.items():
        for small in ([True] if args.small_only else [True, False]):
            path = os.path.join(args.out_dir, name + ("_small" if small else "") + ".onnx")
            if args.only and os.path.basename(path) != args.only + ".onnx":
                continue
            onnx.save(make(small), path)
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
