#!/usr/bin/env python3
"""run_torch_models: every model bench/export_torch_models.py wrote, through the whole model flow on
a farm of its own, beside ONNX Runtime (not CI: the models come from PyTorch, and tuning them all
takes hours on two cores).

It starts trackerd, one CPU device agent (kernels measured single-threaded) and tunerd on free
loopback ports, with their data and logs in a temporary folder, and carries each ONNX file of the
folder through what a user does:
    tune-client tasks  --model F
    tune-client submit --model F --trials N --watch
    tune-client build  --model F -o DIR
    bench/model_bench.py --model F --artifact DIR --threads 1
printing one table row per model as it finishes (its operator counts, task count, trials, tuned
latency beside ONNX Runtime's at one thread, and the largest output difference over the output's
scale); a model that fails at any step gets a row saying which step and why, and the others go
on. The last line is JSON. Run it in build/venv (onnx, onnxruntime and the tunefarm package):
    build/venv/bin/python bench/run_torch_models.py build/models/torch
Any folder of ONNX files serves. With --untuned each model is also built from template defaults
(tunefarm-build-library) and raced beside the tuned build; --threads 1,2 races at each count; the
JSON rows carry the job's own estimate of the tuned model (tune-client status's "model ~"). The
issue-32 table of models (each tuned on a history of its own) is, per model file:
    build/venv/bin/python bench/run_torch_models.py DIR --only NAME --trials 400 --untuned --threads 1,2 \
        [--input-shape hidden_states=1,128,768]
"""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Farm:
    """trackerd, one CPU agent and tunerd on loopback, stopped when the block ends."""

    def __init__(self, bin_dir, work):
        self.bin_dir, self.work = bin_dir, work
        self.tracker = f"127.0.0.1:{free_port()}"
        self.server = f"127.0.0.1:{free_port()}"
        self.procs = []

    def start(self, name, args, env=None):
        log = open(os.path.join(self.work, f"{name}.log"), "w")
        self.procs.append(subprocess.Popen([os.path.join(self.bin_dir, name)] + args, stdout=log,
                                           stderr=subprocess.STDOUT, env=env))

    def client(self, *args, timeout=None):
        return subprocess.run([os.path.join(self.bin_dir, "tune-client"), "--server", self.server,
                               "--tracker", self.tracker, *args], capture_output=True, text=True,
                              timeout=timeout)

    def __enter__(self):
        data = os.path.join(self.work, "data")
        os.makedirs(data)
        self.start("trackerd", ["--listen", self.tracker, "--metrics-listen", "off"])
        # Kernels measured on one thread, as the built models are raced below.
        self.start("device-agent", ["--tracker", self.tracker, "--key", "local-cpu", "--metrics-listen", "off"],
                   env=dict(os.environ, TUNEFARM_NUM_THREADS="1"))
        self.start("tunerd", ["--listen", self.server, "--tracker", self.tracker, "--data-dir", data,
                              "--metrics-listen", "off"])
        deadline = time.time() + 60
        while time.time() < deadline:
            agents = self.client("devices", "--json")
            jobs = self.client("jobs")
            if agents.returncode == 0 and re.search(r'"agents_total":\s*1\b', agents.stdout) and jobs.returncode == 0:
                return self
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise RuntimeError(f"the farm did not come up in a minute: logs in {self.work}")

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            p.terminate()
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def operator_counts(path):
    m = onnx.load(path, load_external_data=False)
    return collections.Counter(n.op_type for n in m.graph.node)


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def shape_args(path, args):
    """--input-shape for the inputs of `path` that the command line gave a shape."""
    names = {i.name for i in onnx.load(path, load_external_data=False).graph.input}
    out = []
    for shape in args.input_shape or []:
        if shape.split("=", 1)[0] in names:
            out += ["--input-shape", shape]
    return out


def carry(farm, path, args, out_root):
    """One model through the flow: a dict of what each step gave, or the step that failed."""
    row = {"model": os.path.basename(path)}
    shapes = shape_args(path, args)
    ops = operator_counts(path)
    row["nodes"] = sum(ops.values())
    row["operators"] = dict(ops.most_common())
    start = time.time()
    tasks = farm.client("tasks", "--model", path, *shapes, "--json", timeout=args.step_timeout)
    if tasks.returncode != 0:
        return dict(row, failed="tasks", error=last_line(tasks.stderr or tasks.stdout))
    table = json.loads(tasks.stdout)
    row["tasks"] = len(table.get("tasks", []))
    row["tasks_s"] = round(time.time() - start, 1)
    start = time.time()
    submit = farm.client("submit", "--model", path, *shapes, "--trials", str(args.trials), "--watch",
                         timeout=args.step_timeout)
    row["submit_s"] = round(time.time() - start, 1)
    if submit.returncode != 0:
        return dict(row, failed="submit", error=last_line(submit.stderr or submit.stdout))
    job = re.search(r"submitted job (\S+)", submit.stdout)
    row["job"] = job.group(1) if job else None
    trials = re.findall(r"(\d+)\s*/\s*\d+\s+trials", submit.stdout)
    row["trials"] = int(trials[-1]) if trials else args.trials
    if row["job"]:
        status = farm.client("status", row["job"], timeout=args.step_timeout)
        estimate = re.search(r"model ~([0-9.]+) ms(?: \(untuned ([0-9.]+) ms\))?", status.stdout)
        if estimate:
            row["estimate_ms"] = float(estimate.group(1))
            if estimate.group(2):
                row["untuned_estimate_ms"] = float(estimate.group(2))
    out = os.path.join(out_root, row["model"].replace(".onnx", ""))
    start = time.time()
    build = farm.client("build", "--model", path, *shapes, "-o", out, "--name", "model", "--json",
                        timeout=args.step_timeout)
    row["build_s"] = round(time.time() - start, 1)
    if build.returncode != 0:
        return dict(row, failed="build", error=last_line(build.stderr or build.stdout))
    untuned = []
    if args.untuned:
        defaults = out + "-untuned"
        os.makedirs(defaults)
        made = subprocess.run([os.path.join(farm.bin_dir, "tunefarm-build-library"), "--model", path, *shapes,
                               "--out", defaults, "--name", "model"], stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=args.step_timeout)
        if made.returncode != 0:
            return dict(row, failed="untuned build", error=last_line(made.stderr or made.stdout))
        untuned = ["--untuned-artifact", defaults]
    row["ok"] = True
    for threads in args.threads:
        bench = subprocess.run([sys.executable, os.path.join(HERE, "model_bench.py"), "--model", path, "--artifact", out,
                                *untuned, "--threads", str(threads), "--rounds", str(args.rounds), "--runs",
                                str(args.runs)], capture_output=True, text=True, timeout=args.step_timeout)
        if bench.returncode != 0:
            return dict(row, failed="model_bench", error=last_line(bench.stderr or bench.stdout))
        result = json.loads(last_line(bench.stdout))
        # One thread's figures under the plain names (the table's), every count's under its own.
        suffix = "" if threads == args.threads[0] else f"_{threads}t"
        row.update({f"tuned_ms{suffix}": result["ours_ms"], f"onnxruntime_ms{suffix}": result["onnxruntime_ms"],
                    f"speedup_vs_onnxruntime{suffix}": result["speedup_vs_onnxruntime"]})
        if "untuned_ms" in result:
            row[f"untuned_ms{suffix}"] = result["untuned_ms"]
        row["max_relative_difference"] = max(row.get("max_relative_difference", 0), result["max_relative_difference"])
    row["ok"] = row["max_relative_difference"] <= args.tolerance
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out + "-untuned", ignore_errors=True)
    return row


def print_row(row):
    name, _, exporter = row["model"].replace(".onnx", "").rpartition(".")
    if not name:  # A file not named <model>.<exporter>.onnx.
        name, exporter = exporter, "-"
    top = ", ".join(f"{op} {n}" for op, n in list(row["operators"].items())[:6])
    if "failed" in row:
        print(f"| {name} | {exporter} | {row['nodes']}: {top} | {row.get('tasks', '-')} | - | - | - | - | - | - | "
              f"failed at {row['failed']}: {row['error']} |", flush=True)
        return
    figure = lambda key: f"{row[key]:.2f}" if key in row else "-"  # noqa: E731
    print(f"| {name} | {exporter} | {row['nodes']}: {top} | {row['tasks']} | {row['trials']} | "
          f"{figure('estimate_ms')} | {row['tuned_ms']:.2f} | {figure('untuned_ms')} | {row['onnxruntime_ms']:.2f} | "
          f"{row['speedup_vs_onnxruntime']:.2f}x | {row['max_relative_difference']:.1e} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models_dir", help="the folder export_torch_models.py wrote")
    parser.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"), help="the build's programs")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--only", nargs="*", help="only the files whose names start so")
    parser.add_argument("--rounds", type=int, default=3, help="model_bench's interleaved rounds")
    parser.add_argument("--runs", type=int, default=3, help="model_bench's inferences per round")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest relative output difference allowed")
    parser.add_argument("--step-timeout", type=int, default=3600, help="seconds one step of one model may take")
    parser.add_argument("--keep", action="store_true", help="keep the farm's folder (logs, history)")
    parser.add_argument("--untuned", action="store_true", help="also build each model untuned and race it beside")
    parser.add_argument("--threads", default="1", help="thread counts to race at, comma-separated (the first is "
                        "the table's)")
    parser.add_argument("--input-shape", action="append", metavar="NAME=d0,d1,...",
                        help="a symbolic input's shape, for the models that have an input of that name (repeatable)")
    args = parser.parse_args()
    try:
        counts = [int(t) for t in args.threads.split(",")]
        if min(counts) < 1:
            raise ValueError
    except ValueError:
        print(f"run_torch_models: --threads {args.threads!r} is not a list of counts such as 1,2", file=sys.stderr)
        return 2
    args.threads = counts

    # Smallest first (the file and its external data): the quick models' rows come early.
    paths = sorted(glob.glob(os.path.join(args.models_dir, "*.onnx")),
                   key=lambda p: (sum(os.path.getsize(f) for f in glob.glob(p + "*")), p))
    if args.only:
        paths = [p for p in paths if any(os.path.basename(p).startswith(o) for o in args.only)]
    if not paths:
        print(f"run_torch_models: no .onnx files in {args.models_dir}", file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="tunefarm-torch-models-")
    rows = []
    print("| model | exporter | ONNX operators | tasks | trials | estimate ms | tuned ms | untuned ms | "
          "ONNX Runtime ms | ORT/tuned | largest relative difference |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
    try:
        with Farm(os.path.abspath(args.bin), work) as farm:
            for path in paths:
                try:
                    row = carry(farm, path, args, os.path.join(work, "built"))
                except subprocess.TimeoutExpired as e:
                    row = {"model": os.path.basename(path), "operators": dict(operator_counts(path)),
                           "failed": "timeout", "error": f"{e.cmd[1:4]} ran past {e.timeout} s"}
                    row["nodes"] = sum(row["operators"].values())
                rows.append(row)
                print_row(row)
    finally:
        if args.keep:
            print(f"run_torch_models: the farm's folder is {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    passed = sum(1 for r in rows if r.get("ok"))
    print(json.dumps({"models": len(rows), "passed": passed, "trials": args.trials, "rows": rows}))
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
