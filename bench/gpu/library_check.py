"""Runs a CUDA kernel library that `tune-client build --target cuda` made on the GPU: each kernel
of its manifest once against PyTorch's result (largest difference), then timed as the agent times
(events around each run, the L2 cleared before it), beside PyTorch. One JSON line on stdout.

    python3 bench/gpu/library_check.py LIBRARY_DIR
"""
import ctypes
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from baseline import case, time_cold  # noqa: E402


def main(directory):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    manifest = json.load(open(os.path.join(directory, "manifest.json")))
    lib = ctypes.CDLL(glob.glob(os.path.join(directory, "lib*.so"))[0])
    torch.cuda.init()
    out = {"library": os.path.basename(directory), "kernels": []}
    for k in manifest["kernels"]:
        fn = getattr(lib, k["function"])
        fn.restype = ctypes.c_int
        ref, flops, _, inputs = case(torch, k["workload"])
        expected = ref()
        result = torch.empty_like(expected)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        args = [ctypes.c_void_p(t.data_ptr()) for t in inputs] + [ctypes.c_void_p(result.data_ptr()), stream]
        rc = fn(*args)
        torch.cuda.synchronize()
        if rc != 0:
            out["kernels"].append({"workload": k["workload"], "error": rc})
            continue
        diff = (result - expected).abs().max().item() / max(expected.abs().max().item(), 1e-30)
        ours_ms = time_cold(torch, lambda: fn(*args))
        theirs_ms = time_cold(torch, ref)
        out["kernels"].append({"workload": k["workload"], "source": k.get("source"), "rel_max_diff": diff,
                               "library_ms": ours_ms, "library_gflops": flops / ours_ms / 1e6,
                               "torch_ms": theirs_ms, "torch_gflops": flops / theirs_ms / 1e6})
        print(f"{k['workload']}: ours {ours_ms:.4f} ms, torch {theirs_ms:.4f} ms, rel diff {diff:.1e}",
              file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
