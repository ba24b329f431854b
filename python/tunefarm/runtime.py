"""Runs a model built by tunefarm (`Client.build_model`, `tune-client build --model`) with NumPy:

    model = tunefarm.load("resnet50/")
    logits = model(data=image)                  # one output: an array; several: a tuple
    outputs = model.run({"data": image})        # always a list, in the manifest's order

The built directory holds the library (lib<name>.so, whose C API its <name>.h describes), its
weights file and manifest.json, which names the inputs and outputs with their shapes and element
types. Tensors are row-major, in exactly those shapes and of the types the manifest gives: float32,
or int64 / int32 / bool for token ids and masks in, labels and comparisons out; an input of another
type raises before the library is called.
"""
import ctypes
import json
import os
import threading

import numpy as np

from tunefarm.errors import TunefarmError

class TensorInfo:
    """An input or output of a built model: its name, shape and element type."""

    # The element types a built model takes (a manifest from before they were written: float32).
    DTYPES = {"float32": np.float32, "int64": np.int64, "int32": np.int32, "bool": np.bool_}

    def __init__(self, name, shape, dtype="float32"):
        if dtype not in self.DTYPES:
            raise TunefarmError(f"{name} is of type {dtype!r}, which this tunefarm package cannot pass")
        self.name = name
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(self.DTYPES[dtype])
        self.size = int(np.prod(self.shape)) if self.shape else 1

    def __repr__(self):
        return f"TensorInfo({self.name!r}, shape={self.shape}, dtype={self.dtype.name})"


class Model:
    """A built model, loaded. One instance runs one inference at a time (calls from several
    threads take turns); load the directory again for another instance."""

    def __init__(self, artifact_dir, num_threads=None):
        self.dir = os.fspath(artifact_dir)
        path = os.path.join(self.dir, "manifest.json")
        try:
            with open(path) as f:
                self.manifest = json.load(f)
        except OSError as e:
            raise TunefarmError(f"{self.dir} is not a built model: cannot read {path} ({e.strerror})") from None
        except ValueError as e:
            raise TunefarmError(f"{path} is not JSON: {e}") from None
        missing = [k for k in ("name", "shared_library", "weights", "inputs", "outputs") if k not in self.manifest]
        if missing:
            raise TunefarmError(f"{path} is not a model's manifest (no {', '.join(missing)}); "
                                "a kernel library has no model to run")
        self.name = self.manifest["name"]
        self.inputs = [TensorInfo(t["name"], t["shape"], t.get("dtype", "float32")) for t in self.manifest["inputs"]]
        self.outputs = [TensorInfo(t["name"], t["shape"], t.get("dtype", "float32")) for t in self.manifest["outputs"]]
        try:
            self._lib = ctypes.CDLL(os.path.join(self.dir, self.manifest["shared_library"]))
        except OSError as e:
            raise TunefarmError(f"cannot load the model's library: {e}") from None
        self._declare()
        handle = ctypes.c_void_p()
        weights = os.path.join(self.dir, self.manifest["weights"]).encode()
        self._check(self._fn("create")(weights, ctypes.byref(handle)))
        self._handle = handle
        self._lock = threading.Lock()
        self.step_names = [self._fn("step_name")(i).decode() for i in range(self._fn("num_steps")())]
        # What every call passes the same: the pointer array types and the element counts.
        self._in_ptrs = ctypes.c_void_p * len(self.inputs)
        self._out_ptrs = ctypes.c_void_p * len(self.outputs)
        self._in_sizes = (ctypes.c_int64 * len(self.inputs))(*[i.size for i in self.inputs])
        self._out_sizes = (ctypes.c_int64 * len(self.outputs))(*[o.size for o in self.outputs])
        if num_threads is not None:
            self.set_num_threads(num_threads)

    def _fn(self, suffix):
        return getattr(self._lib, f"{self.name}_{suffix}")

    def _declare(self):
        pointers = ctypes.POINTER(ctypes.c_void_p)
        sizes = ctypes.POINTER(ctypes.c_int64)
        for suffix, restype, argtypes in [
                ("create", ctypes.c_int, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
                ("destroy", None, [ctypes.c_void_p]),
                ("run_profiled", ctypes.c_int,
                 [ctypes.c_void_p, pointers, sizes, pointers, sizes, ctypes.POINTER(ctypes.c_double)]),
                ("set_num_threads", ctypes.c_int, [ctypes.c_int]),
                ("last_error", ctypes.c_char_p, []),
                ("num_steps", ctypes.c_int, []),
                ("step_name", ctypes.c_char_p, [ctypes.c_int])]:
            fn = self._fn(suffix)
            fn.restype, fn.argtypes = restype, argtypes
        self._run = self._fn("run_profiled")

    def _check(self, code):
        if code != 0:
            raise TunefarmError(f"{self.name}: {self._fn('last_error')().decode()}")

    def set_num_threads(self, num_threads):
        """Threads the kernels use, the calling thread included; 0 restores the default
        ($TUNEFARM_NUM_THREADS, else the CPUs this process may run on). The setting belongs to the
        loaded library: every instance of the same directory shares it."""
        if not isinstance(num_threads, (int, np.integer)) or num_threads < 0:
            raise ValueError(f"num_threads must be a whole number >= 0, not {num_threads!r}")
        self._check(self._fn("set_num_threads")(int(num_threads)))

    def _input_array(self, info, value):
        array = np.asarray(value)
        if array.dtype != info.dtype:
            if array.dtype.kind not in "fiub":
                raise TypeError(f"input '{info.name}' is {array.dtype}; the model takes {info.dtype.name} numbers")
            raise TypeError(f"input '{info.name}' is {array.dtype}; the model takes {info.dtype.name} "
                            f"(convert with .astype(numpy.{info.dtype.name}))")
        if array.shape != info.shape:
            raise ValueError(f"input '{info.name}' has shape {array.shape}; the model takes {info.shape}")
        return np.ascontiguousarray(array)

    def _feeds(self, feeds):
        names = [i.name for i in self.inputs]
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise ValueError(f"{self.name} has no input {', '.join(map(repr, unknown))} (its inputs: {', '.join(names)})")
        missing = [n for n in names if n not in feeds]
        if missing:
            raise ValueError(f"{self.name} needs input {', '.join(map(repr, missing))} (its inputs: {', '.join(names)})")
        return [self._input_array(i, feeds[i.name]) for i in self.inputs]

    def run(self, feeds, *, step_seconds=None):
        """Runs the model on {input name: array of the input's dtype}; answers the outputs, a list of arrays in
        the manifest's order (as ONNX Runtime's session.run(None, feeds)). step_seconds: a float64
        array of len(step_names) that each step's time is added to, for profiling."""
        if self._handle is None:
            raise TunefarmError(f"{self.name} was closed")
        inputs = self._feeds(feeds)
        outputs = [np.empty(o.shape, dtype=o.dtype) for o in self.outputs]
        times = None
        if step_seconds is not None:
            if not (isinstance(step_seconds, np.ndarray) and step_seconds.dtype == np.float64
                    and step_seconds.shape == (len(self.step_names),) and step_seconds.flags.c_contiguous):
                raise ValueError(f"step_seconds must be a float64 array of shape ({len(self.step_names)},)")
            times = step_seconds.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        in_ptrs = self._in_ptrs(*[a.ctypes.data for a in inputs])
        out_ptrs = self._out_ptrs(*[a.ctypes.data for a in outputs])
        with self._lock:
            self._check(self._run(self._handle, in_ptrs, self._in_sizes, out_ptrs, self._out_sizes, times))
        return outputs

    def __call__(self, *args, **kwargs):
        """model(x) or model(name=x, ...): the inputs in order or by name; answers the one output as
        an array, or several as a tuple."""
        if args and len(args) > len(self.inputs):
            raise ValueError(f"{self.name} takes {len(self.inputs)} input(s), got {len(args)}")
        feeds = dict(zip((i.name for i in self.inputs), args))
        twice = [k for k in kwargs if k in feeds]
        if twice:
            raise ValueError(f"input {', '.join(map(repr, twice))} given both by position and by name")
        feeds.update(kwargs)
        outputs = self.run(feeds)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def close(self):
        """Frees the instance (its arena and weights); the library stays loaded."""
        if getattr(self, "_handle", None) is not None:
            self._fn("destroy")(self._handle)
            self._handle = None

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def __del__(self):
        self.close()

    def __repr__(self):
        ins = ", ".join(f"{i.name}{list(i.shape)}" for i in self.inputs)
        outs = ", ".join(f"{o.name}{list(o.shape)}" for o in self.outputs)
        return f"<tunefarm.Model {self.name}: ({ins}) -> ({outs})>"


def load(artifact_dir, num_threads=None):
    """Loads the model built into artifact_dir; num_threads sets the kernels' threads (see
    Model.set_num_threads)."""
    return Model(artifact_dir, num_threads=num_threads)
