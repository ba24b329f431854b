#!/usr/bin/env python3
"""model_bench: a model built by `tune-client build --model` beside ONNX Runtime, in one process.

Both run the same deterministic inputs, interleaved, with the same number of threads (ONNX
Runtime: that many intra-op threads, one inter-op thread, every graph optimization on). Prints the
per-run latency medians, their ratio, the largest output difference relative to the output's
scale, and with --untuned-artifact the untuned build beside them; with --profile, the share of
each step of the built model, and its time by kind of step beside ONNX Runtime's own profile by
operator kind. The last line is JSON.

With --check it only compares outputs (the tests run it so) and exits non-zero when the largest
relative difference is above --tolerance.

The built model runs through the tunefarm package (tunefarm.load). It runs in the virtual
environment that deploy/install-deps.sh makes under the build folder (onnxruntime and numpy pinned
in deploy/python-requirements.txt), where the build installs the package:
    build/venv/bin/python bench/model_bench.py --model build/models/resnet50.onnx --artifact DIR
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

import tunefarm


def onnxruntime_session(model, threads):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def onnxruntime_profile(model, threads, feeds, runs):
    """ONNX Runtime's own per-node profile (SessionOptions.enable_profiling), summed by operator
    kind: milliseconds per inference. A session of its own, so that profiling slows no timed run."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as scratch:
        options.profile_file_prefix = os.path.join(scratch, "ort_profile")
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        session.run(None, feeds)  # The warm-up run is in the profile too: only the last `runs` count.
        for _ in range(runs):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    nodes = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
    per_run = len(nodes) // (runs + 1)
    kinds = {}
    for e in nodes[len(nodes) - per_run * runs:]:
        kind = e.get("args", {}).get("op_name", "?")
        kinds[kind] = kinds.get(kind, 0.0) + e["dur"] / 1e3 / runs
    return kinds


def relative_difference(ours, theirs):
    """The largest difference, over the output's scale (its largest magnitude)."""
    worst = 0.0
    for a, b in zip(ours, theirs):
        b = np.asarray(b, dtype=np.float32).reshape(a.shape)
        scale = max(float(np.max(np.abs(b))), 1e-12)
        worst = max(worst, float(np.max(np.abs(a - b))) / scale)
    return worst


def integer_bounds(model):
    """{input name: the rows of the table a Gather looks it up in} for the integer inputs that are
    indices (token ids); other integer inputs (a mask) take 0 and 1."""
    import onnx

    m = onnx.load(model, load_external_data=False)
    shapes = {t.name: list(t.dims) for t in m.graph.initializer}
    bounds = {}
    for n in m.graph.node:
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[0] in shapes:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
            bounds[n.input[1]] = shapes[n.input[0]][axis]
    return bounds


def feeds_for(model, inputs, rng):
    """Deterministic inputs: floats in [-1, 1); token ids over their table; masks of ones with the
    last quarter zero (padding), as a batch of one short sentence is fed."""
    bounds = integer_bounds(model) if any(i.dtype.kind == "i" for i in inputs) else {}
    feeds = {}
    for i in inputs:
        if i.dtype.kind == "f":
            feeds[i.name] = rng.uniform(-1, 1, i.shape).astype(i.dtype)
        elif i.name in bounds:
            feeds[i.name] = rng.integers(0, bounds[i.name], i.shape).astype(i.dtype)
        else:
            mask = np.ones(i.shape, dtype=i.dtype)
            if mask.ndim:
                mask[..., mask.shape[-1] - mask.shape[-1] // 4:] = 0
            feeds[i.name] = mask
    return feeds


# Untimed runs that open each contender's block of runs: the contender before it leaves its pool's
# threads spinning for a while after its last run (ONNX Runtime's for some milliseconds), on the
# CPUs this one needs; a model of a millisecond measured inside that tail read 1.75x slower on two
# threads. Stopping ONNX Runtime's spinning instead (session.force_spinning_stop) would cost it the
# spinning between its own back-to-back runs, which it has when it runs alone.
SETTLE_S = 0.05


def timed(fn, runs):
    start = time.perf_counter()
    fn()
    while time.perf_counter() - start < SETTLE_S:
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the ONNX file the library was built from")
    parser.add_argument("--artifact", required=True, help="the directory `tune-client build --model` wrote")
    parser.add_argument("--untuned-artifact", help="the same model built without records, raced too")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--runs", type=int, default=10, help="inferences per round and contender")
    parser.add_argument("--check", action="store_true", help="compare outputs only")
    parser.add_argument("--tolerance", type=float, default=1e-3)
    parser.add_argument("--profile", action="store_true", help="time each step of the built model")
    args = parser.parse_args()

    try:
        ours = tunefarm.load(args.artifact, num_threads=args.threads)
        session = onnxruntime_session(args.model, args.threads)
    except (OSError, RuntimeError, tunefarm.TunefarmError) as e:
        print(f"model_bench: {e}", file=sys.stderr)
        return 1
    rng = np.random.default_rng(7)
    feeds = feeds_for(args.model, ours.inputs, rng)
    theirs = session.run(None, feeds)
    outputs = ours.run(feeds)
    difference = relative_difference(outputs, theirs)
    # An integer or boolean output (labels, a comparison) must come out of ONNX Runtime's type, not
    # as floats.
    retyped = [f"{info.name} is {a.dtype}, ONNX Runtime's {np.asarray(b).dtype}"
               for info, a, b in zip(ours.outputs, outputs, theirs)
               if np.asarray(b).dtype.kind in "iub" and a.dtype != np.asarray(b).dtype]
    result = {"model": os.path.basename(args.model), "threads": args.threads, "max_relative_difference": difference}
    if args.check:
        print(f"{result['model']}: largest output difference {difference:.2e} of the output's scale "
              f"(tolerance {args.tolerance:.0e})")
        for r in retyped:
            print(f"model_bench: output {r}", file=sys.stderr)
        print(json.dumps(result))
        return 0 if difference <= args.tolerance and not retyped else 1

    contenders = {"ours": lambda: ours.run(feeds), "onnxruntime": lambda: session.run(None, feeds)}
    if args.untuned_artifact:
        untuned = tunefarm.load(args.untuned_artifact, num_threads=args.threads)
        contenders["untuned"] = lambda: untuned.run(feeds)
    for fn in contenders.values():
        fn()
    samples = {name: [] for name in contenders}
    # Each round starts with the next contender: a contender's idle threads spin a while after its
    # runs (ONNX Runtime's pool, ours), which slows whichever runs next on two threads; in a fixed
    # order the build that always followed ONNX Runtime read up to 1.5x slower. (Pausing between
    # contenders instead let this virtual machine's idle second CPU go, and slowed everyone.)
    order = list(contenders.items())
    for r in range(args.rounds):
        for name, fn in order[r % len(order):] + order[:r % len(order)]:
            samples[name].extend(timed(fn, args.runs))
    medians = {name: statistics.median(s) * 1e3 for name, s in samples.items()}
    for name, ms in medians.items():
        print(f"{name:12s} {ms:9.3f} ms (median of {len(samples[name])})")
    ratio = medians["onnxruntime"] / medians["ours"]
    print(f"ours vs ONNX Runtime: {ratio:.2f}x ({'faster' if ratio >= 1 else 'slower'}); "
          f"largest output difference {difference:.2e} of the output's scale")
    result.update({f"{name}_ms": ms for name, ms in medians.items()})
    result["speedup_vs_onnxruntime"] = ratio
    result["arena_bytes"] = ours.manifest["memory"]["arena_bytes"]
    result["naive_bytes"] = ours.manifest["memory"]["naive_bytes"]
    if args.profile:
        steps = len(ours.step_names)
        profile = np.zeros(steps)
        for _ in range(args.runs):
            ours.run(feeds, step_seconds=profile)
        total = profile.sum()
        top = sorted(range(steps), key=lambda i: -profile[i])[:15]
        print("steps that take longest:")
        for i in top:
            print(f"  {100 * profile[i] / total:5.1f}%  {1e3 * profile[i] / args.runs:8.3f} ms  {ours.step_names[i]}")
        result["profile_top"] = [{"step": ours.step_names[i], "ms": 1e3 * profile[i] / args.runs} for i in top]
        # The same time by kind of step (the operator, or the epilogue / layout conversion a step
        # is), beside ONNX Runtime's own profile of the same runs by operator kind (its fused
        # kernels under their own names: FusedConv, FusedMatMul, SkipLayerNormalization...), which
        # says what a gap to ONNX Runtime is made of.
        kinds = {}
        for i in range(steps):
            kind = ours.step_names[i].rsplit("(", 1)[-1].rstrip(")")
            kinds[kind] = kinds.get(kind, 0.0) + 1e3 * profile[i] / args.runs
        theirs_by_kind = onnxruntime_profile(args.model, args.threads, feeds, args.runs)
        print(f"time by kind of step (ms per inference; ours {1e3 * total / args.runs:.3f}, "
              f"ONNX Runtime's kernels {sum(theirs_by_kind.values()):.3f}):")
        print(f"  {'kind':28s} {'ours':>9s} {'ORT':>9s}")
        for kind in sorted(set(kinds) | set(theirs_by_kind), key=lambda k: -max(kinds.get(k, 0), theirs_by_kind.get(k, 0))):
            mine = f"{kinds[kind]:9.3f}" if kind in kinds else f"{'-':>9s}"
            other = f"{theirs_by_kind[kind]:9.3f}" if kind in theirs_by_kind else f"{'-':>9s}"
            print(f"  {kind:28s} {mine} {other}")
        result["profile_by_kind"] = kinds
        result["onnxruntime_profile_by_kind"] = theirs_by_kind
        result["profile_steps"] = [{"step": ours.step_names[i], "ms": 1e3 * profile[i] / args.runs}
                                   for i in range(steps)]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
