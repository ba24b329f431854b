"""The tuning service (tunerd) from Python: what tune-client does, as objects.

    client = tunefarm.Client("127.0.0.1:9191", token_file="client.token", tls_ca="ca.pem")
    job = client.submit(model="resnet50.onnx", trials=300)
    job.watch()
    client.build_model("resnet50.onnx", "resnet50/")

Authentication and TLS are tune-client's: a bearer token (token=, token_file= or $TUNEFARM_TOKEN)
sent to tunerd on every call, and TLS when a CA to check the server by is given (tls_ca=), with a
client certificate for servers that require one (tls_cert=, tls_key=). Every failure raises a
tunefarm.errors exception whose text is the line tune-client prints for it.
"""
import dataclasses
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
import warnings

import grpc

from tunefarm import _wire
from tunefarm._progress import progress_display, progress_line
from tunefarm.errors import InvalidArgument, JobFailed, NotFound, TunefarmError, from_rpc
from tunefarm.v1 import common_pb2, tuner_pb2, tuner_pb2_grpc

# An uploaded model travels in chunks well under gRPC's 4 MiB message limit (as tune-client's).
_CHUNK_BYTES = 1 << 20
# A model build compiles every kernel of the model; tune-client waits as long.
_BUILD_TIMEOUT_S = 20 * 60
# A watch follows a tunerd that restarts for this long, as `tune-client watch` does.
_RECONNECT_FOR_S = 5 * 60
_ENDED = {"SUCCEEDED", "FAILED", "CANCELLED"}
# A submit whose answer is lost on the way (UNAVAILABLE, DEADLINE_EXCEEDED) is sent again, with the
# same request id so that its job is made once, this many tries in all (as tune-client's).
_SUBMIT_TRIES = 5
_STRATEGIES = {"xgb-sa": tuner_pb2.XGB_SA, "random": tuner_pb2.RANDOM, "grid": tuner_pb2.GRID,
               "genetic": tuner_pb2.GENETIC}


class BuildWarning(UserWarning):
    """A kernel of a build came from its template's default config: nothing was measured for it."""


def _read_pem(path, what):
    try:
        with open(os.fspath(path), "rb") as f:
            data = f.read()
    except OSError:
        raise InvalidArgument(f"cannot read the {what} file '{path}'") from None
    if b"-----BEGIN " not in data:
        raise InvalidArgument(f"the {what} file '{path}' holds no PEM block")
    return data


def _channel(address, tls_ca, tls_cert, tls_key):
    """A channel secured as tune-client's --tls-ca/--tls-cert/--tls-key secure it."""
    if not tls_ca:
        if tls_cert or tls_key:
            raise InvalidArgument("a client certificate was given without the CA to check the server by (tls_ca)")
        return grpc.insecure_channel(address)
    if bool(tls_cert) != bool(tls_key):
        raise InvalidArgument("a client certificate needs both tls_cert and tls_key")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=_read_pem(tls_ca, "CA"),
        private_key=_read_pem(tls_key, "client key") if tls_key else None,
        certificate_chain=_read_pem(tls_cert, "client certificate") if tls_cert else None)
    return grpc.secure_channel(address, credentials)


def _knob_value(value):
    kind = value.WhichOneof("value")
    if kind == "ints":
        return list(value.ints.values)
    return getattr(value, kind) if kind else None


def _config(message):
    return {k.name: _knob_value(k.value) for k in message.knobs}


@dataclasses.dataclass(frozen=True)
class Record:
    """One measurement of the tuning history."""
    workload: str
    target: str
    device_key: str
    template: str
    config: dict            # knob name -> value (an int, a string, or a list of split factors)
    error: str              # "OK", or why it has no time: "COMPILE_ERROR", "WRONG_ANSWER", ...
    error_msg: str
    gflops: float
    mean_cost_s: float
    costs: tuple
    build_time_s: float
    job_id: str
    remeasure_round: int    # 0: the candidate's trial; k: its k-th re-measurement at the job's end
    agent_id: str
    started_at_us: int
    proto: object = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_proto(cls, r):
        return cls(workload=_wire.workload_text(r.workload), target=_wire.target_text(r.target),
                   device_key=r.device_key, template=r.config.template_name, config=_config(r.config),
                   error=common_pb2.ErrorCode.Name(r.result.error), error_msg=r.result.error_msg,
                   gflops=r.gflops, mean_cost_s=r.mean_cost_s, costs=tuple(r.result.costs),
                   build_time_s=r.build_time_s, job_id=r.job_id, remeasure_round=r.remeasure_round,
                   agent_id=r.result.agent_id, started_at_us=r.result.started_at_us, proto=r)


_RECORD_COLUMNS = [f.name for f in dataclasses.fields(Record) if f.name != "proto"]


class Records:
    """Records of the history, fetched page by page as they are iterated (tunerd bounds each answer
    in bytes; the pages follow one another from `offset` until `limit` records or the last one).
    `total` is how many match in all, known once the first page came."""

    def __init__(self, client, request, limit, page_size):
        self._client = client
        self._request = request
        self._limit = limit
        self._page_size = page_size
        self.total = None

    def pages(self):
        """Each answer of tunerd, as a list of Record."""
        offset = self._request.offset
        remaining = self._limit
        while remaining is None or remaining > 0:
            request = tuner_pb2.ListRecordsRequest()
            request.CopyFrom(self._request)
            request.offset = offset
            request.limit = self._page_size if remaining is None else min(self._page_size, remaining)
            page = self._client._call("ListRecords", request, "records", timeout=30)
            self.total = page.total
            if not page.records:
                return
            yield [Record.from_proto(r) for r in page.records]
            offset = page.next_offset or offset + len(page.records)
            if remaining is not None:
                remaining -= len(page.records)
            if offset >= page.total:
                return

    def __iter__(self):
        for page in self.pages():
            yield from page

    def to_pandas(self):
        """A pandas DataFrame of the records, a row each (needs pandas)."""
        try:
            import pandas
        except ImportError:
            raise ImportError("Records.to_pandas() needs pandas (pip install pandas)") from None
        return pandas.DataFrame([[getattr(r, c) for c in _RECORD_COLUMNS] for r in self], columns=_RECORD_COLUMNS)


@dataclasses.dataclass(frozen=True)
class TaskStatus:
    """One task of a job: a workload, its share of the trials and its best figure so far."""
    workload: str
    trials_done: int
    best_gflops: float
    default_gflops: float   # the template's untuned default, once measured; 0 before
    weight: float           # how often it occurs in the model
    flops: float            # of one run
    best_config: dict       # set once the job ended


class JobStatus:
    """A job as tunerd last reported it. str() is tune-client's progress line."""

    def __init__(self, proto):
        self.proto = proto
        p = proto.progress
        self.id = proto.id
        self.state = tuner_pb2.JobState.Name(proto.state)
        self.name = proto.spec.name
        self.trials_done = p.trials_done
        self.trials_budget = p.trials_budget or proto.spec.trials
        self.best_gflops = p.best_gflops
        self.elapsed_s = p.elapsed_s
        self.eta_s = p.eta_s if p.eta_s >= 0 and p.trials_done > 0 else None
        self.errors = {code: n for code, n in p.errors_by_code.items() if code != "OK"}
        self.error = proto.error
        self.activity = proto.activity
        self.tasks = [TaskStatus(_wire.workload_text(t.workload), t.trials_done, t.best_gflops, t.default_gflops,
                                 t.weight or 1.0, t.flops, _config(t.best_config) if t.HasField("best_config") else None)
                      for t in p.tasks]

    @property
    def done(self):
        return self.state in _ENDED

    @property
    def latency_ms(self):
        """A model job's latency as tunerd estimates it, in ms: its tasks' best configs (count x
        time per run) and its other steps; None for a job of one task or until every task has a
        figure."""
        return self.proto.progress.latency_ms or None

    @property
    def untuned_latency_ms(self):
        """The same with the templates' defaults; None until every default has a figure."""
        return self.proto.progress.untuned_latency_ms or None

    def __str__(self):
        return progress_line(self)

    def __repr__(self):
        return f"<JobStatus {self.id} {self.state} {self.trials_done}/{self.trials_budget} trials>"


class Job:
    """A tuning job on tunerd."""

    def __init__(self, client, job_id):
        self.client = client
        self.id = job_id

    def __repr__(self):
        return f"<tunefarm.Job {self.id}>"

    def status(self):
        """The job now (a JobStatus)."""
        return JobStatus(self.client._call("GetJob", tuner_pb2.GetJobRequest(job_id=self.id), f"job {self.id}"))

    def cancel(self):
        """Asks tunerd to cancel the job: the batch in flight is withdrawn, what it measured is kept."""
        return JobStatus(self.client._call("CancelJob", tuner_pb2.CancelJobRequest(job_id=self.id),
                                           f"cancel {self.id}"))

    def watch(self, progress=True, file=None):
        """Follows the job until it ends and answers its last status. With progress (the default) a
        progress bar: redrawn in place in a notebook and on a terminal, a line per event otherwise
        (in `file`, default sys.stdout). Like `tune-client watch`, it dials again when tunerd goes
        away, for up to five minutes."""
        display = progress_display(file) if progress else None
        last = None
        gone_since = time.monotonic()
        reconnecting = False
        try:
            while True:
                heard = False
                stream = self.client._stub.WatchJob(tuner_pb2.WatchJobRequest(job_id=self.id),
                                                    metadata=self.client._metadata)
                try:
                    for event in stream:
                        heard = True
                        last = JobStatus(event.job)
                        if display:
                            display.update(last, event.message)
                except grpc.RpcError as e:
                    if last is None or not last.done:
                        if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                            raise from_rpc(e, self.client.address, f"watching job {self.id}") from None
                        if not heard and time.monotonic() - gone_since > _RECONNECT_FOR_S:
                            raise from_rpc(e, self.client.address,
                                           f"watching job {self.id} (gave up reconnecting)") from None
                finally:
                    # An interrupted watch (Ctrl-C, a notebook's stop button) ends its call too.
                    stream.cancel()
                if last is not None and last.done:
                    return last
                if heard:
                    gone_since = time.monotonic()
                if display and (heard or not reconnecting):
                    display.note(f"lost tunerd at {self.client.address}; reconnecting")
                reconnecting = True
                time.sleep(1)
        finally:
            if display:
                display.close(last)

    def wait(self, progress=False, file=None):
        """Waits for the job to end (watch() without the bar by default); answers its status when it
        succeeded and raises JobFailed, with tune-client's text, when it failed or was cancelled."""
        last = self.watch(progress=progress, file=file)
        if last.state != "SUCCEEDED":
            raise JobFailed(f"job {self.id} ended {last.state}{': ' + last.error if last.error else ''}", last)
        return last

    def records(self, **kwargs):
        """This job's measurements (Client.records with job= this job)."""
        return self.client.records(job=self.id, **kwargs)

    def plot(self, ax=None):
        """Draws the tuning curve, each task's best GFLOP/s so far against the job's trials, with
        matplotlib (which must be installed); answers the axes."""
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            raise ImportError("Job.plot() draws with matplotlib (pip install matplotlib)") from None
        curves = tuning_curves(r for r in self.records() if r.remeasure_round == 0)
        if ax is None:
            _, ax = plt.subplots(figsize=(8, 4.5))
        for workload, (trials, best) in curves.items():
            ax.step(trials, best, where="post", label=workload if len(curves) <= 12 else None)
        ax.set_xlabel("trial (all tasks of the job)")
        ax.set_ylabel("best GFLOP/s so far")
        ax.set_title(f"job {self.id}")
        if curves and len(curves) <= 12:
            ax.legend(fontsize="small")
        ax.grid(True, alpha=0.3)
        return ax


def tuning_curves(records):
    """{workload: ([trial index], [best GFLOP/s so far])} over records in the order they were measured."""
    curves = {}
    for index, r in enumerate(records, 1):
        trials, best = curves.setdefault(r.workload, ([], []))
        trials.append(index)
        best.append(max(r.gflops, best[-1] if best else 0.0))
    return curves


@dataclasses.dataclass(frozen=True)
class ModelTask:
    """A tuning task of a model: a workload, how many nodes compute it, and its share of the FLOPs.
    alternative_of: the workload this task is another way to compute (a convolution as Winograd's),
    tuned beside it; a build takes the faster. Empty for most tasks."""
    workload: str
    count: int
    flops: float
    share: float
    nodes: tuple
    alternative_of: str = ""


@dataclasses.dataclass(frozen=True)
class ModelTasks:
    """What tune-client tasks prints: the tasks largest share first, and the operators not tuned."""
    model_name: str
    tasks: list
    untuned_ops: dict
    tunable_nodes: int
    total_flops: float
    other_steps: int = 0        # the built model's steps that are not tasks ...
    other_bytes: float = 0.0    # ... and the bytes they read and write ...
    other_streaming_bytes: float = 0.0  # ... of which steps of plain arithmetic stream these
    run_bytes: float = 0.0      # what one run of the built model touches

    def __iter__(self):
        return iter(self.tasks)

    def __len__(self):
        return len(self.tasks)


@dataclasses.dataclass(frozen=True)
class Build:
    """A library tunerd built, in `dir`: its files, and a warning for each kernel that came from a
    template's default config."""
    dir: str
    files: list
    warnings: list

    def load(self, num_threads=None):
        """The built model (tunefarm.load of `dir`)."""
        from tunefarm.runtime import load
        return load(self.dir, num_threads=num_threads)


class _Model:
    """An ONNX model to upload: a path, its bytes, or an object with SerializeToString (onnx.ModelProto)."""

    def __init__(self, model):
        if isinstance(model, (bytes, bytearray)):
            self.name, self.data, self.path = "model.onnx", bytes(model), None
        elif hasattr(model, "SerializeToString"):
            self.name, self.data, self.path = "model.onnx", model.SerializeToString(), None
        else:
            self.path = os.fspath(model)
            if not os.path.isfile(self.path):
                raise FileNotFoundError(f"cannot open model file {self.path}")
            self.name, self.data = os.path.basename(self.path), None

    def chunks(self, first):
        """The upload: `first` (which names the file) with the first piece, then the rest."""
        first.file_name = self.name
        source = open(self.path, "rb") if self.data is None else None
        try:
            offset = 0
            while True:
                piece = source.read(_CHUNK_BYTES) if source else self.data[offset:offset + _CHUNK_BYTES]
                offset += len(piece)
                chunk = first if first is not None else tuner_pb2.ModelChunk()
                chunk.onnx = piece
                first = None
                yield chunk
                if len(piece) < _CHUNK_BYTES:
                    return
        finally:
            if source:
                source.close()

    def library_name(self):
        """A C identifier from the file's name ("resnet50-v1.onnx" -> "resnet50_v1")."""
        stem = re.sub(r"\W", "_", os.path.splitext(self.name)[0])
        return stem if re.match(r"[A-Za-z_]", stem or "") else f"model_{stem}"


class Client:
    """A connection to tunerd (default 127.0.0.1:9191).

    token / token_file / $TUNEFARM_TOKEN: the bearer token tunerd checks when its tokens are on (a
    client token, or a read-only one for queries). tls_ca: PEM CA to check a TLS tunerd by
    (plaintext without); tls_cert and tls_key: a client certificate, for servers that require one.
    timeout: seconds each short call may take."""

    def __init__(self, address="127.0.0.1:9191", *, token=None, token_file=None, tls_ca=None, tls_cert=None,
                 tls_key=None, timeout=10.0):
        if token is not None and token_file is not None:
            raise InvalidArgument("give token or token_file, not both")
        if token_file is not None:
            token = _wire.read_token_file(token_file)
        if token is None:
            token = os.environ.get("TUNEFARM_TOKEN") or None
        self.address = address
        self.timeout = timeout
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel = _channel(address, tls_ca, tls_cert, tls_key)
        self._stub = tuner_pb2_grpc.TunerStub(self._channel)

    def __repr__(self):
        return f"<tunefarm.Client {self.address}>"

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def _call(self, method, request, what, timeout=None):
        try:
            return getattr(self._stub, method)(request, timeout=timeout or self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise from_rpc(e, self.address, what) from None

    # --- models and jobs ---------------------------------------------------------------------

    def tasks(self, model, input_shapes=None):
        """The tuning tasks of an ONNX model (a path, bytes or an onnx.ModelProto), as tunerd
        extracts them. input_shapes: {name: dims} (or ["NAME=d0,d1,..."]) for inputs with symbolic
        dimensions."""
        upload = _Model(model)
        first = tuner_pb2.ModelChunk(input_shapes=_wire.input_shapes(input_shapes))
        # tunerd's reason alone, as tune-client prints it (it names the node where there is one).
        r = self._call("ExtractTasks", upload.chunks(first), None, timeout=300)
        return ModelTasks(r.model_name, [ModelTask(_wire.workload_text(t.workload), t.count, t.flops, t.share,
                                                   tuple(t.nodes), t.alternative_of) for t in r.tasks],
                          dict(r.untuned_ops), r.tunable_nodes, r.total_flops, r.other_steps, r.other_bytes,
                          r.other_streaming_bytes, r.run_bytes)

    def submit(self, model=None, workloads=None, *, input_shapes=None, trials=200, device="local-cpu",
               target="llvm", time_budget=None, early_stopping=0, batch_size=0, strategy="xgb-sa", priority=0,
               seed=0, name=None, template=None, request_id=None, submit_timeout=30.0):
        """Submits a tuning job: a model's tasks (each weighed by how often it occurs) or a list of
        workload strings. time_budget: seconds, or "10m", "1h30m". Answers the Job.

        request_id names the submit (default: a random one): tunerd answers a submit of the same
        request id and spec with the job it made, so that one whose answer was lost (tunerd slower
        than submit_timeout seconds, or gone mid-call) is sent again, up to 5 tries, each waiting
        twice as long as the last, without making a second job; each retry is said on stderr."""
        if (model is None) == (not workloads):
            raise InvalidArgument("give either a model or workloads, not both" if model is not None else
                                  "give workloads (workload strings) or an ONNX model")
        if strategy not in _STRATEGIES:
            raise InvalidArgument(f"unknown search strategy '{strategy}' (known: {', '.join(_STRATEGIES)})")
        spec = tuner_pb2.JobSpec(target=_wire.target_message(target), device_key=device, trials=trials,
                                 time_budget_s=_wire.seconds(time_budget), early_stopping=early_stopping,
                                 batch_size=batch_size, strategy=_STRATEGIES[strategy], priority=priority,
                                 seed=seed, name=name or "")
        if isinstance(workloads, str):
            workloads = [workloads]
        for w in workloads or []:
            spec.tasks.add(workload=_wire.workload_message(w), template_name=template or "")
        if model is not None:
            tasks = self.tasks(model, input_shapes)
            for t in tasks:
                spec.tasks.add(workload=_wire.workload_message(t.workload), weight=t.count,
                               alternative_of=t.alternative_of)
            spec.other_steps = tasks.other_steps
            spec.other_bytes = tasks.other_bytes
            spec.other_streaming_bytes = tasks.other_streaming_bytes
            spec.run_bytes = tasks.run_bytes
            if not name and not isinstance(model, (bytes, bytearray)) and not hasattr(model, "SerializeToString"):
                spec.name = os.path.basename(os.fspath(model))
        request = tuner_pb2.SubmitJobRequest(spec=spec, request_id=request_id or uuid.uuid4().hex)
        return Job(self, self._submit_with_retries(request, submit_timeout).job.id)

    def _submit_with_retries(self, request, timeout):
        pause = 0.5
        for attempt in range(1, _SUBMIT_TRIES + 1):
            try:
                return self._call("SubmitJob", request, "submit", timeout=timeout)
            except TunefarmError as e:
                lost = getattr(e, "code", None) in ("UNAVAILABLE", "DEADLINE_EXCEEDED")
                if not lost or attempt == _SUBMIT_TRIES:
                    raise
                print(f"tunefarm: submit try {attempt} of {_SUBMIT_TRIES}: {e}; sending it again in {pause:.1f} s "
                      f"with the same request id {request.request_id} (the job is made once)", file=sys.stderr)
            time.sleep(pause)
            pause *= 2
            timeout *= 2

    def job(self, job_id):
        """The job of that id (checked with tunerd)."""
        job = Job(self, job_id)
        job.status()
        return job

    def jobs(self, states=None, limit=0):
        """Jobs, newest first, as JobStatus; states: only these ("running", "succeeded", ...)."""
        request = tuner_pb2.ListJobsRequest(limit=limit)
        for s in states or []:
            if s.upper() not in tuner_pb2.JobState.keys() or s.upper() == "JOB_STATE_UNSPECIFIED":
                raise InvalidArgument(f"unknown job state '{s}' (queued, running, succeeded, failed, cancelled)")
            request.states.append(tuner_pb2.JobState.Value(s.upper()))
        return [JobStatus(j) for j in self._call("ListJobs", request, "jobs").jobs]

    # --- the history ---------------------------------------------------------------------------

    def best(self, workload, device=None, target="llvm", top=None):
        """The fastest recorded config of a workload (a Record; NotFound when nothing was measured
        yet), or with top=k the k fastest configs, fastest first (a list, maybe empty)."""
        request = tuner_pb2.QueryBestRequest(workload=_wire.workload_message(workload),
                                             target=_wire.target_message(target), device_key=device or "",
                                             top_k=top or 1)
        records = [Record.from_proto(r) for r in self._call("QueryBest", request, "best").records]
        if top is not None:
            return records
        if not records:
            raise NotFound(f"no successful measurement of {workload} on {target}"
                           f"{f' (device {device})' if device else ''} yet")
        return records[0]

    def records(self, workload=None, job=None, limit=None, offset=0, page_size=1000):
        """Measurements, oldest first, from `offset`: all that match, or at most `limit`. Iterating
        the answer fetches page after page of at most page_size (tunerd takes up to 10000)."""
        if limit is not None and limit < 1:
            raise InvalidArgument(f"limit {limit} must be at least 1")
        if not 1 <= page_size <= 10000:
            raise InvalidArgument(f"page_size {page_size} must be within 1..10000")
        request = tuner_pb2.ListRecordsRequest(job_id=job or "", offset=offset)
        if workload:
            request.workload.CopyFrom(_wire.workload_message(workload))
        return Records(self, request, limit, page_size)

    # --- builds --------------------------------------------------------------------------------

    def build_model(self, model, out_dir, *, input_shapes=None, target="llvm", device=None, name=None,
                    require_tuned=False):
        """Builds a model as a library (`tune-client build --model`): its tasks' best records, or
        template defaults (a BuildWarning each; require_tuned refuses), into out_dir with its
        manifest. name: the library's C name (default: from the file's name). Answers a Build,
        whose load() runs it."""
        upload = _Model(model)
        library = tuner_pb2.BuildLibraryRequest(target=_wire.target_message(target), device_key=device or "",
                                                name=name or upload.library_name(), require_tuned=require_tuned)
        first = tuner_pb2.ModelChunk(input_shapes=_wire.input_shapes(input_shapes), library=library)
        return self._receive_build(lambda: self._stub.BuildModel(
            upload.chunks(first), timeout=_BUILD_TIMEOUT_S, metadata=self._metadata), out_dir)

    def build_library(self, workloads, out_dir, *, target="llvm", device=None, name="tunefarm_kernels",
                      require_tuned=False):
        """A kernel library of the history's best configs for these workloads (`tune-client build
        --workload ...`) into out_dir. Answers a Build."""
        if isinstance(workloads, str):
            workloads = [workloads]
        if not workloads:
            raise InvalidArgument("nothing to build: give workloads")
        request = tuner_pb2.BuildLibraryRequest(workloads=[_wire.workload_message(w) for w in workloads],
                                                target=_wire.target_message(target), device_key=device or "",
                                                name=name, require_tuned=require_tuned)
        return self._receive_build(lambda: self._stub.BuildLibrary(
            request, timeout=_BUILD_TIMEOUT_S, metadata=self._metadata), out_dir)

    def _receive_build(self, start, out_dir):
        """Receives a library's files into a scratch directory inside out_dir and moves them into
        place only when every one is complete, as tune-client does."""
        out_dir = os.fspath(out_dir)
        os.makedirs(out_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".tunefarm-build-", dir=out_dir)
        try:
            sizes, notes = {}, []
            stream = start()
            try:
                for chunk in stream:
                    notes.extend(chunk.warnings)
                    name = chunk.file
                    if not name or name in (".", "..") or "/" in name or len(name) > 255:
                        raise InvalidArgument(f"tunerd sent a file named '{name}'")
                    if chunk.offset != sizes.get(name, 0):
                        raise InvalidArgument(f"tunerd sent {name} out of order")
                    with open(os.path.join(staging, name), "ab") as f:
                        f.write(chunk.data)
                    sizes[name] = sizes.get(name, 0) + len(chunk.data)
            except grpc.RpcError as e:
                raise from_rpc(e, self.address, "build") from None
            finally:
                # A bad chunk ends the call here rather than when the stream is collected.
                stream.cancel()
            if not sizes:
                raise InvalidArgument("tunerd answered with no files")
            files = sorted(sizes)
            for name in files:
                os.replace(os.path.join(staging, name), os.path.join(out_dir, name))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        for note in notes:
            warnings.warn(note, BuildWarning, stacklevel=3)
        return Build(out_dir, files, notes)
