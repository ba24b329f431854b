"""Text forms of what the services exchange, as tune-client writes them: workload and target strings
to messages and back, durations, input shapes and token files.

The services parse every workload and target they receive with their own rules (and answer with
the same message tune-client prints when one is wrong), so this side only splits the text into the
message's fields.
"""
import os
import re

from tunefarm.errors import InvalidArgument
from tunefarm.v1 import common_pb2, tuner_pb2

_DTYPES = {"float32": common_pb2.FLOAT32, "float16": common_pb2.FLOAT16, "float64": common_pb2.FLOAT64,
           "int8": common_pb2.INT8, "int32": common_pb2.INT32, "uint8": common_pb2.UINT8}
_DTYPE_NAMES = {v: k for k, v in _DTYPES.items()}


def workload_message(text):
    """'matmul:M=512,N=512,K=512' -> tunefarm.v1.Workload (the service checks names and values)."""
    if not isinstance(text, str):
        raise InvalidArgument(f"a workload is a string such as 'matmul:M=512,N=512,K=512', not {type(text).__name__}")
    op, colon, rest = text.strip().partition(":")
    if not colon:
        raise InvalidArgument(f"workload '{text}': missing ':' after the operator name (expected OP:NAME=VALUE,...)")
    message = common_pb2.Workload(op=op.strip())
    for item in rest.split(",") if rest.strip() else []:
        name, eq, value = (part.strip() for part in item.partition("="))
        if not eq:
            raise InvalidArgument(f"workload '{text}': parameter '{item.strip()}' has no '=VALUE'")
        if name == "dtype":
            if value not in _DTYPES:
                raise InvalidArgument(f"workload '{text}': unknown dtype '{value}' (known: {', '.join(_DTYPES)})")
            message.dtype = _DTYPES[value]
            continue
        try:
            message.params.add(name=name, value=int(value))
        except ValueError:
            raise InvalidArgument(f"workload '{text}': parameter {name} has the value '{value}', not an integer") from None
    return message


def workload_text(message):
    """tunefarm.v1.Workload -> its workload string (every parameter, as the service filled them in)."""
    params = [f"{p.name}={p.value}" for p in message.params]
    if message.dtype not in (common_pb2.DTYPE_UNSPECIFIED, common_pb2.FLOAT32):
        params.append(f"dtype={_DTYPE_NAMES.get(message.dtype, message.dtype)}")
    return f"{message.op}:{','.join(params)}"


def target_message(text):
    """'llvm -mcpu=znver4' -> tunefarm.v1.Target (the service checks the kind and options)."""
    words = str(text).split()
    if not words:
        raise InvalidArgument(f"target '{text}': empty target (expected 'llvm' or 'cuda', with options)")
    message = common_pb2.Target(kind=words[0])
    for word in words[1:]:
        name, eq, value = word.lstrip("-").partition("=")
        if not word.startswith("-") or not eq or name not in ("mtriple", "mcpu", "mattr", "arch"):
            raise InvalidArgument(f"target '{text}': option '{word}' is not one of -mtriple=, -mcpu=, -mattr=, -arch=")
        setattr(message, name, value)
    return message


def target_text(message):
    words = [message.kind or "llvm"]
    for name in ("mtriple", "mcpu", "mattr", "arch"):
        if getattr(message, name):
            words.append(f"-{name}={getattr(message, name)}")
    return " ".join(words)


def seconds(duration):
    """A number of seconds, or '90', '90s', '10m', '1h', '1h30m' (tune-client's --time-budget)."""
    if duration is None:
        return 0.0
    if isinstance(duration, (int, float)):
        if duration < 0:
            raise InvalidArgument(f"duration {duration} is negative")
        return float(duration)
    text = str(duration)
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise InvalidArgument(f"duration '{text}' must look like 90, 90s, 10m, 1h or 1h30m")
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return sum(float(n) * unit[u] for n, u in parts)


def input_shapes(shapes):
    """{name: (d0, d1, ...)} or ['NAME=d0,d1,...'] -> [tunefarm.v1.InputShape]."""
    if not shapes:
        return []
    items = shapes.items() if isinstance(shapes, dict) else []
    if not isinstance(shapes, dict):
        pairs = []
        for text in shapes:
            name, eq, dims = str(text).partition("=")
            if not eq or not name:
                raise InvalidArgument(f"input shape '{text}' must look like NAME=d0,d1,...")
            try:
                pairs.append((name, [int(d) for d in dims.split(",")]))
            except ValueError:
                raise InvalidArgument(f"input shape '{text}': dimensions must be integers") from None
        items = pairs
    out = []
    for name, dims in items:
        dims = [int(d) for d in dims]
        if not dims or any(d <= 0 for d in dims):
            raise InvalidArgument(f"input shape of {name}: every dimension must be positive, got {dims}")
        out.append(tuner_pb2.InputShape(name=name, dims=dims))
    return out


def read_token_file(path):
    """The one token of a secret file (its non-empty line, without surrounding blanks), as the
    daemons and tune-client read --token-file."""
    try:
        with open(os.fspath(path)) as f:
            tokens = [line.strip(" \t\r\n") for line in f]
    except OSError as e:
        raise InvalidArgument(f"{path}: cannot read the secret file ({e.strerror})") from None
    tokens = [t for t in tokens if t]
    if not tokens:
        raise InvalidArgument(f"{path}: the secret file holds no token")
    if len(tokens) > 1:
        raise InvalidArgument(f"{path}: holds more than one token for --token")
    return tokens[0]
