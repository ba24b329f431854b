#!/usr/bin/env python3
"""An ONNX model tuned on the farm, built, and run beside ONNX Runtime on the same input.

    pip install ./python onnxruntime
    python examples/python/tune_onnx.py build/models/resnet50_small.onnx --trials 64
"""
import argparse
import time

import numpy as np
import onnxruntime as ort

import tunefarm

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("model", help="an ONNX file")
parser.add_argument("--server", default="127.0.0.1:9191", help="tunerd's address")
parser.add_argument("--trials", type=int, default=64)
parser.add_argument("--out", default="tuned-model", help="where the built model goes")
args = parser.parse_args()

client = tunefarm.Client(args.server)  # token_file=... and tls_ca=... for a farm beyond loopback
for task in client.tasks(args.model):
    print(f"{task.count} x {task.workload}  ({100 * task.share:.0f}% of the FLOPs)")
client.submit(model=args.model, trials=args.trials).wait(progress=True)
model = client.build_model(args.model, args.out, device="local-cpu").load(num_threads=1)

options = ort.SessionOptions()
options.intra_op_num_threads = 1
session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
feeds = {i.name: np.random.default_rng(0).uniform(-1, 1, i.shape).astype(np.float32) for i in model.inputs}
for name, run in [("tunefarm", lambda: model.run(feeds)), ("onnxruntime", lambda: session.run(None, feeds))]:
    run()
    start = time.perf_counter()
    for _ in range(20):
        run()
    print(f"{name:12s} {(time.perf_counter() - start) / 20 * 1e3:8.3f} ms per run")
ours, theirs = model.run(feeds), session.run(None, feeds)
print(f"largest difference: {max(float(np.abs(a - b).max()) for a, b in zip(ours, theirs)):.2e}")
