"""tunefarm.Client against real daemons on loopback: jobs (submit, watch, cancel, wait), the history
(best, records in pages), builds, and failures that carry the service's message, worded as
tune-client prints them, over TLS and with tokens."""
import io
import os
import signal
import socket
import sys
import threading
import time
import types
import warnings

import pytest

import tunefarm
from conftest import CLIENT_TOKEN, READ_ONLY_TOKEN, free_port, tune_client
from tunefarm.client import tuning_curves

WORKLOAD = "matmul:M=32,N=32,K=32"


@pytest.fixture(scope="module")
def finished_job(client):
    """One short job (12 trials in batches of 4) whose history the tests read."""
    job = client.submit(workloads=[WORKLOAD], trials=12, batch_size=4, name="python-test")
    out = io.StringIO()
    status = job.watch(file=out)
    return job, status, out.getvalue()


def test_submit_and_watch(finished_job):
    job, status, shown = finished_job
    assert status.state == "SUCCEEDED", status.error
    assert status.done and status.trials_done >= 12
    assert status.best_gflops > 0
    assert [t.workload for t in status.tasks] == [WORKLOAD]
    assert status.tasks[0].best_config, "a finished job names each task's winner"
    # Away from a terminal, a line per event, then the final state.
    assert "/12 trials" in shown and f"job {job.id} SUCCEEDED" in shown, shown
    assert job.status().state == "SUCCEEDED"
    assert job.wait().state == "SUCCEEDED"


def test_watch_on_a_terminal_redraws_one_line(client, finished_job):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    out = Terminal()
    client.job(finished_job[0].id).watch(file=out)
    assert out.getvalue().startswith("\r[########################] ") and out.getvalue().endswith("\n")
    assert out.getvalue().count("\n") == 1


def test_watch_in_a_notebook_updates_one_display(client, finished_job, monkeypatch, capsys):
    # A notebook kernel as the package sees one: IPython with a shell that has a kernel.
    shown = []

    class HTML:
        def __init__(self, data):
            self.data = data

    class Handle:
        def update(self, html):
            shown.append(html.data)

    def display(html, display_id=None):
        assert display_id is True, "the bar is one display, updated in place"
        shown.append(html.data)
        return Handle()

    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    ipython.display = types.ModuleType("IPython.display")
    ipython.display.HTML, ipython.display.display = HTML, display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", ipython.display)
    status = client.job(finished_job[0].id).watch()
    assert status.state == "SUCCEEDED" and len(shown) >= 2
    assert f"<b>job {status.id}</b> SUCCEEDED" in shown[-1]
    assert f"<progress value='{status.trials_done}' max='12'" in shown[-1]
    assert capsys.readouterr().out == "", "nothing goes to stdout in a notebook"


def test_watch_follows_a_job_across_a_tunerd_restart(farm):
    tunerd = farm.start_tunerd("tunerd-restart")
    with tunefarm.Client(tunerd.address) as client:
        job = client.submit(workloads=["matmul:M=24,N=24,K=24"], trials=24, batch_size=4)
        out = io.StringIO()
        watched = {}
        watcher = threading.Thread(target=lambda: watched.update(status=job.watch(file=out)))
        watcher.start()
        # Stopped once the job runs and measured a batch: it resumes (and says so) after the restart.
        deadline = time.monotonic() + 60
        while "task 0: " not in out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        tunerd.stop()
        assert watcher.is_alive(), "the job was still running when tunerd stopped"
        farm.start_tunerd("tunerd-restart", address=tunerd.address, start=2)
        watcher.join(timeout=180)
    assert watched["status"].state == "SUCCEEDED", out.getvalue()
    assert out.getvalue().count(f"lost tunerd at {tunerd.address}; reconnecting\n") == 1, out.getvalue()


def test_best(client, finished_job):
    best = client.best(WORKLOAD)
    assert best.error == "OK" and best.gflops > 0 and best.workload == WORKLOAD
    assert best.gflops == pytest.approx(finished_job[1].tasks[0].best_gflops, rel=1e-6)
    assert best.config == finished_job[1].tasks[0].best_config
    top = client.best(WORKLOAD, device="local-cpu", top=3)
    assert 1 <= len(top) <= 3 and top[0].gflops >= top[-1].gflops
    with pytest.raises(tunefarm.NotFound, match="no successful measurement of matmul:M=64,N=32,K=32 on llvm yet"):
        client.best("matmul:M=64,N=32,K=32")
    assert client.best("matmul:M=64,N=32,K=32", top=2) == []


def test_records_come_in_pages(client, finished_job):
    job = finished_job[0]
    everything = list(client.records(job=job.id))
    assert len(everything) >= 12 and all(r.job_id == job.id for r in everything)
    paged = client.records(job=job.id, page_size=5)
    pages = list(paged.pages())
    assert paged.total == len(everything)
    assert [len(p) for p in pages][:-1] == [5] * (len(pages) - 1) and len(pages) >= 3
    assert [r.proto for p in pages for r in p] == [r.proto for r in everything]
    window = list(job.records(offset=3, limit=7, page_size=2))
    assert [r.proto for r in window] == [r.proto for r in everything[3:10]]


def test_records_to_pandas(client, finished_job):
    records = client.records(job=finished_job[0].id)
    try:
        import pandas
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            records.to_pandas()
        return
    frame = records.to_pandas()
    assert isinstance(frame, pandas.DataFrame)
    assert len(frame) == len(list(records)) and frame["gflops"].max() > 0


def test_tuning_curve(finished_job):
    curves = tuning_curves(r for r in finished_job[0].records() if r.remeasure_round == 0)
    trials, best = curves[WORKLOAD]
    assert trials[0] == 1 and len(trials) >= 12
    assert best == sorted(best) and best[-1] > 0


def test_plot(finished_job):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    ax = finished_job[0].plot()
    assert ax.get_ylabel() == "best GFLOP/s so far" and len(ax.get_lines()) == 1


def test_cancel(client):
    job = client.submit(workloads=["matmul:M=48,N=48,K=48"], trials=5000, batch_size=4)
    assert job.cancel().id == job.id
    status = job.watch(progress=False)
    assert status.state == "CANCELLED"
    with pytest.raises(tunefarm.JobFailed, match=f"job {job.id} ended CANCELLED") as failed:
        job.wait()
    assert failed.value.job.state == "CANCELLED"
    assert job.id in [j.id for j in client.jobs(states=["cancelled"])]


def test_errors_carry_the_service_message_as_tune_client_prints_it(client, farm):
    bad = "matmul:M=32,N=32"
    with pytest.raises(tunefarm.ServiceError) as refused:
        client.submit(workloads=[bad], trials=4)
    assert refused.value.code == "INVALID_ARGUMENT"
    assert "missing required parameter K" in refused.value.details
    # tune-client checks the workload before sending it, with the rules tunerd applies: the same reason.
    code, printed = tune_client(farm.tunerd.address, "submit", "--workload", bad, "--trials", "4")
    assert code == 1 and printed.removeprefix("tune-client: ") in str(refused.value)

    with pytest.raises(tunefarm.ServiceError) as no_board:
        client.submit(workloads=[WORKLOAD], device="no-such-board", trials=4)
    code, printed = tune_client(farm.tunerd.address, "submit", "--workload", WORKLOAD, "--device", "no-such-board",
                                "--trials", "4")
    assert code == 1 and printed == f"tune-client: {no_board.value}"

    with pytest.raises(tunefarm.NotFound) as unknown:
        client.job("no-such-job")
    code, printed = tune_client(farm.tunerd.address, "status", "no-such-job")
    assert code == 1 and printed == f"tune-client: {unknown.value}"

    with pytest.raises(tunefarm.ServiceError) as target:
        client.submit(workloads=[WORKLOAD], target="llvm -mcpu=not-a-cpu", trials=4)
    code, printed = tune_client(farm.tunerd.address, "submit", "--workload", WORKLOAD, "--target",
                                "llvm -mcpu=not-a-cpu", "--trials", "4")
    assert code == 1 and printed == f"tune-client: {target.value}"

    with pytest.raises(tunefarm.InvalidArgument, match="has no '=VALUE'"):
        client.submit(workloads=["matmul:M"], trials=4)
    with pytest.raises(tunefarm.InvalidArgument, match="duration '5 minutes'"):
        client.submit(workloads=[WORKLOAD], time_budget="5 minutes")


def test_a_submit_sent_again_gets_its_job_and_another_spec_is_refused(client):
    first = client.submit(workloads=[WORKLOAD], trials=4, batch_size=4, request_id="python-resubmit")
    again = client.submit(workloads=[WORKLOAD], trials=4, batch_size=4, request_id="python-resubmit")
    assert again.id == first.id
    with pytest.raises(tunefarm.ServiceError) as other:
        client.submit(workloads=[WORKLOAD], trials=8, batch_size=4, request_id="python-resubmit")
    assert other.value.code == "ALREADY_EXISTS" and first.id in str(other.value)


def test_a_submit_that_times_out_is_sent_again_and_makes_one_job(farm, capfd):
    tunerd = farm.start_tunerd("tunerd-resubmit")
    try:
        # A tunerd that does not answer for a while: the first try's deadline passes, the next gets in.
        tunerd.popen.send_signal(signal.SIGSTOP)
        threading.Timer(1.5, lambda: tunerd.popen.send_signal(signal.SIGCONT)).start()
        with tunefarm.Client(tunerd.address) as client:
            job = client.submit(workloads=[WORKLOAD], trials=4, batch_size=4, submit_timeout=0.5)
            assert [j.id for j in client.jobs()] == [job.id]
        assert "submit try 1 of 5: submit: " in capfd.readouterr().err
    finally:
        tunerd.popen.send_signal(signal.SIGCONT)
        tunerd.stop()


def test_unreachable_service(farm):
    address = f"127.0.0.1:{free_port()}"
    with tunefarm.Client(address, timeout=2) as nobody, pytest.raises(tunefarm.Unreachable) as gone:
        nobody.jobs()
    assert str(gone.value).startswith(f"jobs: cannot reach {address} (")
    # What to check, as tune-client says it.
    assert str(gone.value).endswith("; is it running, and is that its --listen address?")
    code, printed = tune_client(address, "jobs")
    assert code == 1 and printed.endswith("; is it running, and is that its --listen address?")
    assert isinstance(gone.value, ConnectionError)


def test_tls_and_tokens(secure_tunerd, farm, tmp_path):
    address, ca = secure_tunerd.address, secure_tunerd.ca
    with tunefarm.Client(address, tls_ca=ca) as anonymous, pytest.raises(tunefarm.ServiceError) as refused:
        anonymous.jobs()
    assert refused.value.code == "UNAUTHENTICATED" and "requires a token" in str(refused.value)
    code, printed = tune_client(address, "--tls-ca", ca, "jobs", env={"TUNEFARM_TOKEN": ""})
    assert code == 1 and printed == f"tune-client: {refused.value}"

    reader_file = farm.secret("reader.token", READ_ONLY_TOKEN)
    with tunefarm.Client(address, tls_ca=ca, token_file=reader_file) as reader:
        reader.jobs()
        with pytest.raises(tunefarm.ServiceError) as denied:
            reader.submit(workloads=[WORKLOAD], trials=4)
    assert denied.value.code == "PERMISSION_DENIED"

    with tunefarm.Client(address, tls_ca=ca, token=CLIENT_TOKEN) as owner:
        job = owner.submit(workloads=["matmul:M=16,N=16,K=16"], trials=4, batch_size=4)
        assert job.wait().state == "SUCCEEDED"
        assert owner.best("matmul:M=16,N=16,K=16").gflops > 0

    os.environ["TUNEFARM_TOKEN"] = CLIENT_TOKEN
    try:
        with tunefarm.Client(address, tls_ca=ca) as from_environment:
            assert from_environment.job(job.id).status().state == "SUCCEEDED"
    finally:
        del os.environ["TUNEFARM_TOKEN"]

    # Plaintext to a TLS server does not get through.
    with tunefarm.Client(address, token=CLIENT_TOKEN, timeout=3) as plain, pytest.raises(tunefarm.Unreachable) as mismatch:
        plain.jobs()
    assert "give tls_ca= with the CA that signed its certificate" in str(mismatch.value)
    two = tmp_path / "two.token"
    two.write_text("a\nb\n")
    with pytest.raises(tunefarm.InvalidArgument, match="holds more than one token"):
        tunefarm.Client(address, token_file=two)
    with pytest.raises(tunefarm.InvalidArgument, match="without the CA"):
        tunefarm.Client(address, tls_cert=ca)
    not_pem = tmp_path / "ca.pem"
    not_pem.write_text("hello")
    with pytest.raises(tunefarm.InvalidArgument, match="holds no PEM block"):
        tunefarm.Client(address, tls_ca=not_pem)


_DEFAULT_KEPT = "does not beat the template's default"


def test_build_library(client, finished_job, tmp_path):
    out = tmp_path / "kernels"
    # Every warning the build gives is caught here (pytest.warns would pass on the ones it does not
    # match, the tuned kernel's below, into the run's summary).
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        build = client.build_library([WORKLOAD, "matmul:M=8,N=8,K=8"], out, name="pykernels")
    assert [str(w.message) for w in warned] == build.warnings
    assert all(issubclass(w.category, tunefarm.BuildWarning) for w in warned)
    assert "libpykernels.so" in build.files and "pykernels.h" in build.files
    assert sorted(os.listdir(out)) == sorted(build.files), "no staging directory is left behind"
    # The tuned kernel is used only where it beats the default by 5% on the key; on a short job it
    # may not, and the build says so: the one warning that must be there is the missing record's.
    assert "no record of matmul:M=8,N=8,K=8 for target 'llvm': built from the template's default config" in build.warnings
    assert all(w.startswith("no record of") or _DEFAULT_KEPT in w for w in build.warnings), build.warnings
    with pytest.raises(tunefarm.ServiceError) as refused:
        client.build_library(["matmul:M=8,N=8,K=8"], tmp_path / "refused", require_tuned=True)
    assert str(refused.value).startswith("build: ")
    assert os.listdir(tmp_path / "refused") == [], "a failed build leaves nothing"


def test_unreachable_has_no_socket_left(farm):
    # Client objects close their channels; a port in use by nobody stays free.
    port = free_port()
    with tunefarm.Client(f"127.0.0.1:{port}", timeout=1):
        pass
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_model_tasks_submit_build_and_load(client, tiny_model, tmp_path):
    tasks = client.tasks(tiny_model)
    assert [t.workload for t in tasks] == ["conv2d_nchw:N=1,C=3,H=8,W=8,K=4,R=3,S=3,stride=1,pad=1,dilation=1",
                                           "dense:M=1,N=10,K=256,bias=1,residual=0,relu=0,gelu=0,gelu_tanh=0,silu=0,w_block=0"]
    assert [t.nodes for t in tasks] == [("conv",), ("fc",)] and tasks.untuned_ops == {"Flatten": 1}
    assert tasks.tunable_nodes == 2 and sum(t.share for t in tasks) == pytest.approx(1.0)
    # A run touches at least the two weights (a 4x3x3x3 filter, a 10x256 matrix).
    assert tasks.run_bytes >= 4 * (4 * 3 * 3 * 3 + 10 * 256)
    assert 0 <= tasks.other_streaming_bytes <= tasks.other_bytes

    job = client.submit(model=tiny_model, trials=8, batch_size=4)
    status = job.wait()
    assert status.name == "tiny.onnx" and len(status.tasks) == 2
    assert status.latency_ms and status.latency_ms > 0

    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        build = client.build_model(tiny_model, tmp_path / "tiny", device="local-cpu", require_tuned=True)
    # Every task was tuned; a task whose best config did not beat the default by 5% keeps the default.
    assert all(_DEFAULT_KEPT in str(w.message) for w in warned), [str(w.message) for w in warned]
    assert all(_DEFAULT_KEPT in w for w in build.warnings) and "manifest.json" in build.files
    assert "libtiny.so" in build.files
    model = build.load(num_threads=1)
    assert [(i.name, i.shape) for i in model.inputs] == [("x", (1, 3, 8, 8))]

    with pytest.raises(tunefarm.ServiceError) as bad:
        client.tasks(b"not an onnx file")
    code, printed = tune_client(client.address, "tasks", "--model", _write(tmp_path / "bad.onnx", b"not an onnx file"))
    assert code == 1 and printed.replace("bad.onnx", "model.onnx") == f"tune-client: {bad.value}"
    with pytest.raises(FileNotFoundError, match="cannot open model file"):
        client.tasks(tmp_path / "missing.onnx")


def _write(path, data):
    path.write_bytes(data)
    return str(path)


def test_model_latency_is_tunerds_estimate():
    """JobStatus shows the estimate tunerd put in the job's progress (common/wire/wire.h
    model_latency, tested beside it), and none where tunerd has none."""
    from tunefarm.client import JobStatus
    from tunefarm.v1 import tuner_pb2
    job = tuner_pb2.Job(id="job-1")
    for gflops in (10.0, 20.0):
        job.progress.tasks.add(flops=1e6, weight=2, best_gflops=gflops, default_gflops=gflops / 2)
    assert JobStatus(job).latency_ms is None and "model ~" not in str(JobStatus(job))
    job.progress.latency_ms = 0.75
    status = JobStatus(job)
    assert status.latency_ms == 0.75 and status.untuned_latency_ms is None
    assert "model ~0.750 ms" in str(status) and "untuned" not in str(status)
    job.progress.untuned_latency_ms = 1.5
    assert "model ~0.750 ms (untuned 1.500 ms)" in str(JobStatus(job))
