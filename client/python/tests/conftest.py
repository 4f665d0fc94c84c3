"""Real flashq processes for the Python client's tests: `flashq up` with the demo pair (a broker and
a worker in one process, as a user starts it), a bare flashq-broker without workers (a tiny queue
for overload, a short unknown-model grace), and a CurveZMQ broker with keys from `flashq keygen`.
Programs come from FLASHQ_BIN (the build's bin directory); ports are free loopback ports."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

PYTHON_DIR = pathlib.Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parents[1]
sys.path.insert(0, str(PYTHON_DIR))

import flashq  # noqa: E402

TARGET = str(REPO / "models/demo/target")
DRAFTER = str(REPO / "models/demo/drafter")


def bin_path(name: str) -> str:
    directory = os.environ.get("FLASHQ_BIN", str(REPO / "build/bin"))
    path = os.path.join(directory, name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not built (set FLASHQ_BIN to the build's bin directory)")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A program run for a test, its output in a log file shown when the test fails."""

    def __init__(self, args, log_path: pathlib.Path):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=REPO,
                                     env={**os.environ, "OMP_NUM_THREADS": "1"})

    def running(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.running():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class Broker:
    """Where a started broker listens, and a client factory for it."""

    def __init__(self, process: Process, frontend: str, stream: str, http_port=None):
        self.process = process
        self.frontend = frontend
        self.stream = stream
        self.http_port = http_port

    def client(self, **kwargs) -> flashq.Client:
        return flashq.Client(self.frontend, self.stream, **kwargs)

    def async_client(self, **kwargs) -> flashq.AsyncClient:
        return flashq.AsyncClient(self.frontend, self.stream, **kwargs)


def _http_status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as response:
            return response.status
    except OSError:
        return 0


def _wait(predicate, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="session")
def up(tmp_path_factory):
    """`flashq up` on the demo pair, ready once /readyz says its worker registered. A port taken
    between free_port() and the bind makes it exit: then it tries other ports."""
    scratch = tmp_path_factory.mktemp("up")
    for attempt in range(3):
        frontend, stream = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
        http_port = free_port()
        process = Process([bin_path("flashq"), "up", "--model", TARGET, "--drafter", DRAFTER, "--slots", "2",
                           "--device", "cpu", "--frontend", frontend, "--stream", stream,
                           "--http", f"127.0.0.1:{http_port}", "--gateway", "127.0.0.1:0"],
                          scratch / f"up-{attempt}.log")
        ready = _wait(lambda: _http_status(http_port, "/readyz") == 200 or not process.running(), 60)
        if ready and process.running():
            yield Broker(process, frontend, stream, http_port)
            assert process.stop() == 0, process.output()
            return
        output = process.output()
        process.stop()
        if process.running():
            break
    pytest.fail(f"flashq up never became ready:\n{output}")


def start_broker(tmp_path: pathlib.Path, *flags: str) -> Broker:
    """A flashq-broker without workers, answering its frontend."""
    for attempt in range(3):
        frontend, stream = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
        process = Process([bin_path("flashq-broker"), "--frontend", frontend, "--stream", stream,
                           "--backend", f"tcp://127.0.0.1:{free_port()}", "--http", "", *flags],
                          tmp_path / f"broker-{attempt}.log")
        if not _wait(lambda: not process.running(), 0.3):
            return Broker(process, frontend, stream)
        process.stop()
    pytest.fail(f"flashq-broker did not start:\n{process.output()}")


@pytest.fixture
def idle_broker(tmp_path):
    """A broker with no worker: jobs stay queued; the queue holds 2 jobs; a job naming a model
    is refused as unknown 1 ms after the start."""
    broker = start_broker(tmp_path, "--max-queued-jobs", "2", "--unknown-model-grace-ms", "1",
                          "--drain-timeout-ms", "0")
    yield broker
    broker.process.stop()


def keygen(directory: pathlib.Path, name: str):
    """(secret key file, public key file) written by `flashq keygen --out`."""
    prefix = directory / name
    result = subprocess.run([bin_path("flashq"), "keygen", "--out", str(prefix)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return str(prefix) + ".key", str(prefix) + ".pub"


@pytest.fixture
def curve_broker(tmp_path):
    """A CurveZMQ broker whose allow-list holds the key pair `client`; `stranger` is not on it."""
    server_secret, server_public = keygen(tmp_path, "broker")
    client_secret, client_public = keygen(tmp_path, "client")
    stranger_secret, _ = keygen(tmp_path, "stranger")
    allowed = tmp_path / "allowed"
    allowed.write_text("# the test client\n" + pathlib.Path(client_public).read_text())
    broker = start_broker(tmp_path, "--curve-secret-key", server_secret, "--curve-allowed-keys", str(allowed),
                          "--drain-timeout-ms", "0")
    broker.keys = {"server_public": server_public, "server_secret": server_secret, "client_secret": client_secret,
                   "client_public": client_public, "stranger_secret": stranger_secret}
    yield broker
    broker.process.stop()


def flashq_generate(prompt: str, max_tokens: int, *flags: str) -> dict:
    """The model run in one process, without a broker: `flashq generate --json`."""
    import json
    result = subprocess.run([bin_path("flashq"), "generate", "--model", TARGET, "--device", "cpu", "--max-tokens",
                             str(max_tokens), "--json", "--prompt", prompt, *flags],
                            capture_output=True, text=True, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture
def short_memory_cluster(tmp_path):
    """flashq-broker keeping only 4 events per job for replay, and a flashq-worker with the demo
    target: a late subscriber finds the early events gone."""
    broker = start_broker(tmp_path, "--replay-events-per-job", "4", "--drain-timeout-ms", "0")
    backend = next(a for a in broker.process.proc.args if a.startswith("tcp://") and a not in
                   (broker.frontend, broker.stream))
    worker = Process([bin_path("flashq-worker"), "--broker", backend, "--model", TARGET, "--device", "cpu",
                      "--slots", "1", "--drain-timeout-ms", "0"], tmp_path / "worker.log")
    yield broker
    worker.stop()
    broker.process.stop()
