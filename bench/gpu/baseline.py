"""Times the GPU check's operators with PyTorch, as the agent times ours: each run between CUDA
events, the L2 cache cleared before it, medians of many runs after a warm-up. cuBLAS runs with TF32
off (our kernels compute in FP32), cuDNN with its autotuner on (it picks its fastest algorithm).

    python3 bench/gpu/baseline.py WORKLOAD... > baseline.json

Prints one JSON object: per workload the median milliseconds, GFLOP/s and what ran. Without a GPU
(or without torch) it prints the reason as {"error": ...} and exits 0, so that the run goes on.
"""
import json
import sys


def parse(workload):
    op, _, params = workload.partition(":")
    return op, {k: int(v) for k, v in (p.split("=") for p in params.split(","))}


def case(torch, workload):
    """The call, its FLOPs (counted as our operator descriptions count them), what runs, and its
    inputs in our kernels' argument order (the same layouts: row-major A[M,K] and B[K,N]; NCHW input
    and KCRS weights)."""
    op, p = parse(workload)
    dev = "cuda"
    f32 = torch.float32
    if op == "matmul":
        a = torch.randn(p["M"], p["K"], device=dev, dtype=f32)
        b = torch.randn(p["K"], p["N"], device=dev, dtype=f32)
        return (lambda: torch.matmul(a, b)), 2 * p["M"] * p["N"] * p["K"], "torch.matmul (cuBLAS, TF32 off)", [a, b]
    if op in ("conv2d_nchw", "depthwise_conv2d_nchw"):
        n, c, h, w, r, s = p["N"], p["C"], p["H"], p["W"], p["R"], p["S"]
        stride, pad = p.get("stride", 1), p.get("pad", 0)
        depthwise = op.startswith("depthwise")
        k = c if depthwise else p["K"]
        x = torch.randn(n, c, h, w, device=dev, dtype=f32)
        wt = torch.randn(k, 1 if depthwise else c, r, s, device=dev, dtype=f32)
        groups = c if depthwise else 1
        oh = (h + 2 * pad - r) // stride + 1
        ow = (w + 2 * pad - s) // stride + 1
        flops = 2 * n * k * oh * ow * r * s * (1 if depthwise else c)
        fn = lambda: torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad, groups=groups)
        return fn, flops, "torch.nn.functional.conv2d (cuDNN, TF32 off, benchmark mode)", [x, wt]
    raise ValueError(f"no PyTorch form for {op}")


def time_cold(torch, fn, runs=100, warmup=10):
    l2 = torch.cuda.get_device_properties(0).L2_cache_size or (64 << 20)
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
    for start, stop in pairs:
        flush.zero_()
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    ms = sorted(start.elapsed_time(stop) for start, stop in pairs)
    return ms[len(ms) // 2]


def main(workloads):
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"error": f"no torch: {e}"}))
        return 0
    if not torch.cuda.is_available():
        print(json.dumps({"error": "torch sees no CUDA device"}))
        return 0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
           "cudnn": torch.backends.cudnn.version(), "results": {}}
    for w in workloads:
        fn, flops, what, _ = case(torch, w)
        ms = time_cold(torch, fn)
        out["results"][w] = {"ms": ms, "gflops": flops / (ms * 1e-3) / 1e9, "flops": flops, "library": what}
        print(f"{w}: {ms:.4f} ms, {flops / (ms * 1e-3) / 1e9:.0f} GFLOP/s ({what})", file=sys.stderr)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
