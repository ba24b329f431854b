"""tunefarm.compile: a PyTorch module tuned on the farm and run as the library tunefarm builds.

PyTorch is not a dependency of the package: compile() imports it when called."""
import os
import tempfile


class CompiledModule:
    """The built model behind a module's signature: takes the example inputs' shapes (torch tensors
    or NumPy arrays) in the module's argument order; answers torch tensors when given torch tensors,
    NumPy arrays otherwise, one output alone or several as a tuple."""

    def __init__(self, model, job, out_dir):
        self.model = model
        self.job = job
        self.dir = out_dir

    def __call__(self, *args):
        import torch
        as_torch = any(isinstance(a, torch.Tensor) for a in args)
        arrays = [a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else a for a in args]
        outputs = self.model.run(dict(zip((i.name for i in self.model.inputs), arrays)))
        if as_torch:
            outputs = [torch.from_numpy(o) for o in outputs]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __repr__(self):
        return f"<tunefarm.CompiledModule {self.model!r} job {self.job.id if self.job else '-'}>"


def compile(module, example_inputs, *, client=None, trials=200, device="local-cpu", out_dir=None,
            num_threads=None, progress=True, **submit_options):
    """Exports `module` with torch.onnx.export on example_inputs (a tensor or a tuple of them), tunes
    its tasks on the farm (client: a tunefarm.Client, default the local tunerd; trials=0 skips
    tuning and builds from the history as it is), builds it into out_dir (default a new temporary
    directory) and answers a callable with the module's signature."""
    try:
        import torch
    except ImportError:
        raise ImportError("tunefarm.compile needs PyTorch (pip install torch)") from None
    from tunefarm.client import Client

    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    client = client or Client()
    out_dir = out_dir or tempfile.mkdtemp(prefix="tunefarm-compile-")
    os.makedirs(out_dir, exist_ok=True)
    onnx_path = os.path.join(out_dir, f"{type(module).__name__}.onnx")
    names = [f"input_{i}" for i in range(len(example_inputs))]
    module = module.eval()
    with torch.no_grad():
        export_options = {"input_names": names, "opset_version": 17}
        # The TorchScript exporter writes the plain graph tunefarm imports; newer PyTorch defaults to
        # the dynamo one, which needs onnxscript.
        try:
            torch.onnx.export(module, example_inputs, onnx_path, dynamo=False, **export_options)
        except TypeError:
            torch.onnx.export(module, example_inputs, onnx_path, **export_options)
    job = None
    if trials:
        job = client.submit(model=onnx_path, trials=trials, device=device, **submit_options)
        job.wait(progress=progress)
    build = client.build_model(onnx_path, out_dir, device=device if trials else None,
                               name=type(module).__name__.lower())
    return CompiledModule(build.load(num_threads=num_threads), job, out_dir)
