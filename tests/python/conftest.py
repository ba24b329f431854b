"""A farm of real processes on 127.0.0.1 for the tunefarm package's tests: trackerd, one device
agent (key local-cpu) and tunerd on free ports, as tests/integration's harness starts them, plus a
second tunerd with TLS and tokens. Every process is stopped and its files removed at the end.

TUNEFARM_BIN_DIR names the built programs and TUNEFARM_SOURCE_DIR the repository (the ctest
entry sets both)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import grpc
import pytest

from tunefarm.v1 import tracker_pb2, tracker_pb2_grpc

BIN_DIR = os.environ.get("TUNEFARM_BIN_DIR", "")
SOURCE_DIR = os.environ.get("TUNEFARM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
CLIENT_TOKEN = "python-client-secret"
READ_ONLY_TOKEN = "python-reader-secret"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def program(name):
    path = os.path.join(BIN_DIR, name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built (TUNEFARM_BIN_DIR={BIN_DIR!r})")
    return path


class Process:
    def __init__(self, args, log_path):
        self.log_path = log_path
        # Metrics off: the daemons' default metrics ports are fixed, and tests run side by side.
        env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS="1", TUNEFARM_NUM_THREADS="1",
                   TUNEFARM_METRICS_LISTEN="off")
        with open(log_path, "wb") as log:
            self.popen = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def wait_until(condition, what, process, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.popen.poll() is not None:
            pytest.fail(f"{what}: the process exited ({process.popen.returncode}):\n{process.log()}")
        if condition():
            return
        time.sleep(0.05)
    pytest.fail(f"{what} within {timeout}s:\n{process.log()}")


class Farm:
    def __init__(self, workdir):
        self.dir = workdir
        self.processes = []
        self.tracker = f"127.0.0.1:{free_port()}"
        tracker = self.start("trackerd", ["--listen", self.tracker, "--log-level", "info"], "trackerd")
        channel = grpc.insecure_channel(self.tracker)
        stub = tracker_pb2_grpc.TrackerStub(channel)

        def agents():
            try:
                status = stub.QueueStatus(tracker_pb2.QueueStatusRequest(), timeout=1)
            except grpc.RpcError:
                return 0
            return sum(k.agents_total for k in status.keys if k.device_key == "local-cpu")

        wait_until(lambda: _answers(channel), "trackerd answers", tracker)
        agent = self.start("device-agent", ["--tracker", self.tracker, "--key", "local-cpu", "--id", "py-agent",
                                            "--log-level", "info"], "agent")
        wait_until(lambda: agents() == 1, "the agent joins the tracker", agent)
        channel.close()
        self.certs = None

    def start(self, name, args, log_name):
        process = Process([program(name), *args], os.path.join(self.dir, f"{log_name}.log"))
        self.processes.append(process)
        return process

    def start_tunerd(self, name, extra_args=(), tls_ca=None, address=None, start=1):
        """tunerd `name` (its data in NAME-data); a restart gives the address it had and its start's number."""
        address = address or f"127.0.0.1:{free_port()}"
        process = self.start("tunerd", ["--listen", address, "--tracker", self.tracker, "--data-dir",
                                        os.path.join(self.dir, f"{name}-data"), "--build-threads", "1",
                                        "--log-level", "info", *extra_args], f"{name}-{start}")
        if tls_ca:
            with open(tls_ca, "rb") as f:
                channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(f.read()))
        else:
            channel = grpc.insecure_channel(address)
        wait_until(lambda: _answers(channel), f"{name} answers", process)
        channel.close()
        process.address = address
        return process

    def make_certs(self):
        if self.certs is None:
            self.certs = os.path.join(self.dir, "certs")
            subprocess.run(["bash", os.path.join(SOURCE_DIR, "deploy", "make-certs.sh"), self.certs, "localhost",
                            "127.0.0.1"], check=True, capture_output=True)
        return self.certs

    def secret(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text + "\n")
        os.chmod(path, 0o600)
        return path

    def close(self):
        for p in reversed(self.processes):
            p.stop()


def _answers(channel):
    ready = grpc.channel_ready_future(channel)
    try:
        ready.result(timeout=0.5)
        return True
    except grpc.FutureTimeoutError:
        # Stops its polling thread, which would otherwise outlive the channel.
        ready.cancel()
        return False


@pytest.fixture(scope="session")
def farm():
    workdir = tempfile.mkdtemp(prefix="tunefarm-python-test-")
    farm = Farm(workdir)
    farm.tunerd = farm.start_tunerd("tunerd")
    yield farm
    farm.close()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def secure_tunerd(farm):
    """A tunerd serving TLS (deploy/make-certs.sh's certificate) that takes a client and a read-only token."""
    certs = farm.make_certs()
    process = farm.start_tunerd(
        "tunerd-tls", ["--tls-cert", os.path.join(certs, "server.pem"), "--tls-key", os.path.join(certs, "server.key"),
                       "--client-token-file", farm.secret("client.token", CLIENT_TOKEN),
                       "--read-only-token-file", farm.secret("reader.token", READ_ONLY_TOKEN)],
        tls_ca=os.path.join(certs, "ca.pem"))
    process.ca = os.path.join(certs, "ca.pem")
    return process


@pytest.fixture(scope="session")
def client(farm):
    import tunefarm
    with tunefarm.Client(farm.tunerd.address) as c:
        yield c


def tune_client(address, *args, env=None):
    """tune-client's exit code and stderr, for comparing its error texts with the package's."""
    run = subprocess.run([program("tune-client"), "--server", address, *args], capture_output=True, text=True,
                         env=dict(os.environ, **(env or {})), timeout=60)
    return run.returncode, run.stderr.strip()


@pytest.fixture(scope="session")
def tiny_model():
    """A small ONNX model (a convolution with bias and ReLU, then a matrix multiply): written with the
    onnx package of the system's Python, which the build's models come from too."""
    workdir = tempfile.mkdtemp(prefix="tunefarm-python-model-")
    path = os.path.join(workdir, "tiny.onnx")
    subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(__file__), "make_tiny_model.py"), path],
                   check=True)
    yield path
    shutil.rmtree(workdir, ignore_errors=True)

