"""Joins what bench/gpu/run.sh gathered into its JSON summary: per operator our best tuned
GFLOP/s (the best record's mean cost), PyTorch's, the ratio, the trials measured and the job's wall
time; the GPU as nvidia-smi named it; the run's wall time. One JSON line on stdout."""
import argparse
import csv
import json


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError):
        return []


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", required=True)
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--wall", type=float, required=True)
    a = ap.parse_args()

    baseline = (lines(a.baseline) or [{}])[0]
    try:
        with open(a.gpu) as f:
            rows = list(csv.reader(f))
        gpu = dict(zip([h.strip() for h in rows[0]], [v.strip() for v in rows[1]]))
    except (OSError, IndexError):
        gpu = {}

    ops = []
    for job in lines(a.jobs):
        w = job["workload"]
        status = job.get("status") or {}
        progress = status.get("progress", {})
        ours = job.get("best")
        base = baseline.get("results", {}).get(w, {})
        ours_gflops = ours.get("gflops", 0.0) if ours else 0.0
        entry = {
            "workload": w,
            "ours_gflops": round(ours_gflops, 1),
            "ours_ms": round(ours.get("mean_cost_s", 0.0) * 1e3, 4) if ours else None,
            "library_gflops": round(base["gflops"], 1) if base else None,
            "library_ms": round(base["ms"], 4) if base else None,
            "library": base.get("library"),
            "ratio": round(ours_gflops / base["gflops"], 3) if base and ours_gflops else None,
            "trials": progress.get("trials_done", 0),
            "errors": progress.get("errors_by_code", {}),
            "wall_s": job.get("wall_s"),
            "job": job.get("job"),
            "state": status.get("state"),
            "best_config": ours.get("config") if ours else None,
        }
        ops.append(entry)
    print(json.dumps({"gpu": gpu, "torch": baseline.get("torch"), "cudnn": baseline.get("cudnn"),
                      "baseline_error": baseline.get("error"), "wall_s": a.wall, "operators": ops}))


if __name__ == "__main__":
    main()
