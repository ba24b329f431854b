#!/usr/bin/env python3
"""threads_bench: built models on 1 and on 2 threads (or any counts), interleaved in one process.

Each artifact (a directory `tune-client build --model` or tunefarm-build-library wrote; several
builds of one model, e.g. before and after a change, given as LABEL=DIR with distinct --name) runs
in blocks of --runs inferences, one block per thread count in turn, each block starting with the
next contender so that none always follows another's spinning threads. For every contender it
prints the median and minimum wall time per inference, the median CPU time per inference (all the
process's threads: what a second thread costs the machine), and each thread count's median beside
the first one's. The load average before and after is printed too; the last line is JSON. With
--steps, every run also adds up each step's time, and the steps that take longest are printed with
their time per contender (which steps two threads speed up and which they slow down).

    build/venv/bin/python bench/threads_bench.py --artifact base=DIR1 --artifact new=DIR2 --threads 1,2
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import tunefarm
from model_bench import feeds_for


def timed(model, feeds, runs, step_seconds=None):
    wall, cpu = [], []
    for _ in range(runs):
        c, w = time.process_time(), time.perf_counter()
        model.run(feeds, step_seconds=step_seconds)
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--artifact", action="append", required=True, help="DIR or LABEL=DIR; repeatable")
    parser.add_argument("--model", help="the ONNX file, where the model takes token ids")
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--blocks", type=int, default=8, help="blocks per contender")
    parser.add_argument("--runs", type=int, default=10, help="inferences per block")
    parser.add_argument("--steps", type=int, default=0, metavar="N", help="print the N longest steps' times")
    args = parser.parse_args()

    threads = [int(t) for t in args.threads.split(",")]
    models = {}
    try:
        for spec in args.artifact:
            label, _, path = spec.rpartition("=")
            models[label or os.path.basename(os.path.normpath(path))] = tunefarm.load(path)
    except (OSError, tunefarm.TunefarmError) as e:
        print(f"threads_bench: {e}", file=sys.stderr)
        return 1
    feeds = feeds_for(args.model, next(iter(models.values())).inputs, np.random.default_rng(7))
    contenders = [(label, t) for label in models for t in threads]
    for label, t in contenders:
        models[label].set_num_threads(t)
        models[label].run(feeds)
    load_before = os.getloadavg()[0]
    wall = {c: [] for c in contenders}
    cpu = {c: [] for c in contenders}
    steps = {(label, t): np.zeros(len(models[label].step_names)) for label, t in contenders} if args.steps else {}
    for b in range(args.blocks):
        k = b % len(contenders)
        for label, t in contenders[k:] + contenders[:k]:
            models[label].set_num_threads(t)
            w, c = timed(models[label], feeds, args.runs, steps.get((label, t)))
            wall[(label, t)].extend(w)
            cpu[(label, t)].extend(c)
    load_after = os.getloadavg()[0]
    print(f"load average {load_before:.1f} before, {load_after:.1f} after; {args.blocks} blocks of {args.runs}")
    print(f"{'build':12s} {'threads':>7s} {'median ms':>10s} {'min ms':>9s} {'CPU ms':>9s} {'vs first':>9s}")
    result = {"load": [load_before, load_after], "runs": []}
    for label, t in contenders:
        median = statistics.median(wall[(label, t)]) * 1e3
        first = statistics.median(wall[(label, threads[0])]) * 1e3
        row = {"build": label, "threads": t, "median_ms": median, "min_ms": min(wall[(label, t)]) * 1e3,
               "cpu_ms": statistics.median(cpu[(label, t)]) * 1e3, "speedup": first / median}
        result["runs"].append(row)
        print(f"{label:12s} {t:7d} {median:10.3f} {row['min_ms']:9.3f} {row['cpu_ms']:9.3f} {row['speedup']:8.2f}x")
    for label in models if args.steps else []:
        names = models[label].step_names
        per_run = {t: steps[(label, t)] * 1e3 / len(wall[(label, t)]) for t in threads}
        print(f"{label}: the {args.steps} longest steps, ms per run on " + ", ".join(f"{t}" for t in threads) + " threads")
        for i in sorted(range(len(names)), key=lambda i: -per_run[threads[0]][i])[:args.steps]:
            print("  " + " ".join(f"{per_run[t][i]:8.3f}" for t in threads) + f"  {names[i]}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
