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


def carry(farm, path, args, out_root):
    """One model through the flow: a dict of what each step gave, or the step that failed."""
    row = {"model": os.path.basename(path)}
    ops = operator_counts(path)
    row["nodes"] = sum(ops.values())
    row["operators"] = dict(ops.most_common())
    start = time.time()
    tasks = farm.client("tasks", "--model", path, "--json", timeout=args.step_timeout)
    if tasks.returncode != 0:
        return dict(row, failed="tasks", error=last_line(tasks.stderr or tasks.stdout))
    table = json.loads(tasks.stdout)
    row["tasks"] = len(table.get("tasks", []))
    row["tasks_s"] = round(time.time() - start, 1)
    start = time.time()
    submit = farm.client("submit", "--model", path, "--trials", str(args.trials), "--watch", timeout=args.step_timeout)
    row["submit_s"] = round(time.time() - start, 1)
    if submit.returncode != 0:
        return dict(row, failed="submit", error=last_line(submit.stderr or submit.stdout))
    job = re.search(r"submitted job (\S+)", submit.stdout)
    row["job"] = job.group(1) if job else None
    trials = re.findall(r"(\d+)\s*/\s*\d+\s+trials", submit.stdout)
    row["trials"] = int(trials[-1]) if trials else args.trials
    out = os.path.join(out_root, row["model"].replace(".onnx", ""))
    start = time.time()
    build = farm.client("build", "--model", path, "-o", out, "--name", "model", "--json", timeout=args.step_timeout)
    row["build_s"] = round(time.time() - start, 1)
    if build.returncode != 0:
        return dict(row, failed="build", error=last_line(build.stderr or build.stdout))
    bench = subprocess.run([sys.executable, os.path.join(HERE, "model_bench.py"), "--model", path, "--artifact", out,
                            "--threads", "1", "--rounds", str(args.rounds), "--runs", str(args.runs)],
                           capture_output=True, text=True, timeout=args.step_timeout)
    if bench.returncode != 0:
        return dict(row, failed="model_bench", error=last_line(bench.stderr or bench.stdout))
    result = json.loads(last_line(bench.stdout))
    row.update(tuned_ms=result["ours_ms"], onnxruntime_ms=result["onnxruntime_ms"],
               speedup_vs_onnxruntime=result["speedup_vs_onnxruntime"],
               max_relative_difference=result["max_relative_difference"])
    row["ok"] = row["max_relative_difference"] <= args.tolerance
    shutil.rmtree(out, ignore_errors=True)
    return row


def print_row(row):
    name, _, exporter = row["model"].replace(".onnx", "").rpartition(".")
    top = ", ".join(f"{op} {n}" for op, n in list(row["operators"].items())[:6])
    if "failed" in row:
        print(f"| {name} | {exporter} | {row['nodes']}: {top} | {row.get('tasks', '-')} | - | - | - | - | "
              f"failed at {row['failed']}: {row['error']} |", flush=True)
        return
    print(f"| {name} | {exporter} | {row['nodes']}: {top} | {row['tasks']} | {row['trials']} | "
          f"{row['tuned_ms']:.1f} | {row['onnxruntime_ms']:.1f} | {row['speedup_vs_onnxruntime']:.2f}x | "
          f"{row['max_relative_difference']:.1e} |", flush=True)


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
    args = parser.parse_args()

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
    print("| model | exporter | ONNX operators | tasks | trials | tuned ms | ONNX Runtime ms | ORT/tuned | "
          "largest relative difference |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |", flush=True)
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
