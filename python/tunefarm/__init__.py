"""tunefarm from Python: tune ONNX models on a tunefarm farm and run what it builds with NumPy.

    import tunefarm
    client = tunefarm.Client("127.0.0.1:9191")
    job = client.submit(model="model.onnx", trials=200)
    job.watch()                                   # a progress bar, in a terminal or a notebook
    model = client.build_model("model.onnx", "built/").load()
    y = model(x)                                  # NumPy in, NumPy out

Client speaks to tunerd as tune-client does (same tokens, TLS and error texts); tunefarm.load runs
a built model's library in this process; tunefarm.compile (with PyTorch installed) does all of it
for a torch.nn.Module.
"""
from tunefarm._torch import compile
from tunefarm.client import (Build, BuildWarning, Client, Job, JobStatus, ModelTasks, Record, Records,
                             TaskStatus)
from tunefarm.errors import InvalidArgument, JobFailed, NotFound, ServiceError, TunefarmError, Unreachable
from tunefarm.runtime import Model, TensorInfo, load

__all__ = ["Client", "Job", "JobStatus", "TaskStatus", "Record", "Records", "Build", "BuildWarning", "ModelTasks",
           "Model", "TensorInfo", "load", "compile", "TunefarmError", "InvalidArgument", "ServiceError",
           "Unreachable", "NotFound", "JobFailed"]
