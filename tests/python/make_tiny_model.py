#!/usr/bin/python3
"""Writes the tests' small ONNX model to argv[1]: x[1,3,8,8] -> Conv 3x3 (4 channels, bias) -> Relu
-> Flatten -> Gemm (10 outputs) -> y[1,10], with deterministic random weights. Two tuning tasks (the
convolution and the dense layer), a few milliseconds to build."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(11)
w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w")
b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
fc = numpy_helper.from_array((rng.standard_normal((10, 256)) * 0.1).astype(np.float32), "fc")
fc_b = numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc_b")
nodes = [
    helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
    helper.make_node("Relu", ["c"], ["r"], name="relu"),
    helper.make_node("Flatten", ["r"], ["f"], name="flatten", axis=1),
    helper.make_node("Gemm", ["f", "fc", "fc_b"], ["y"], name="fc", transB=1),
]
graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                          initializer=[w, b, fc, fc_b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="tunefarm-tests")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
