"""Fixtures of the rdmad package's tests: real daemons of this build tree.

The daemons listen on loopback only (127.0.0.1) with their sockets in a
temporary directory. RDMAD_BINARY names the daemon (CTest sets it; default:
build/daemon/rdmad of this checkout), RDMAD_TEST_TRANSPORT the transport
(tcp here; verbs in the soft-RoCE lab).
"""

import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import pytest

import rdmad

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parent.parent
RDMAD_BINARY = os.environ.get("RDMAD_BINARY",
                              str(SOURCE / "build" / "daemon" / "rdmad"))
TRANSPORT = os.environ.get("RDMAD_TEST_TRANSPORT", "tcp")
# How much the tests move: the lab (an emulated CPU) sets it below 1.
SCALE = float(os.environ.get("RDMAD_TEST_SCALE", "1"))


def scaled(n, minimum=1):
    """`n` items at the run's scale (RDMAD_TEST_SCALE)."""
    return max(minimum, int(n * SCALE))


class Daemon:
    """An rdmad child process with its own socket under `directory`."""

    def __init__(self, directory, name, config=None):
        self.socket = os.path.join(directory, f"{name}.sock")
        self.log_path = os.path.join(directory, f"{name}.log")
        self._log = open(self.log_path, "wb")
        args = [RDMAD_BINARY, "--socket", self.socket, "--peer_listen",
                "127.0.0.1:0", "--transport", TRANSPORT, "--log_level", "info"]
        if config is not None:
            # A daemon config file (text protobuf, docs/CONFIG.md).
            path = os.path.join(directory, f"{name}.conf")
            with open(path, "w") as f:
                f.write(config)
            args += ["--config", path]
        self.process = subprocess.Popen(args, stdout=self._log,
                                        stderr=subprocess.STDOUT)
        self.pid = self.process.pid
        self.peer_address = self._wait_ready()

    def _wait_ready(self):
        deadline = time.monotonic() + 20
        last = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"rdmad exited at start:\n{self.log()}")
            try:
                client = rdmad.Client.connect(self.socket, timeout=2)
                status = client.status()
                client.close()
                if status["pid"] == self.pid:
                    return status["peer_address"]
                last = f"socket answered by pid {status['pid']}"
            except rdmad.Error as e:
                last = e
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"rdmad did not answer in time: {last}\n{self.log()}")

    def connect(self, **kwargs):
        return rdmad.Client.connect(self.socket, **kwargs)

    def open_fds(self):
        """How many descriptors the daemon holds now."""
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="rdmad-py-") as d:
        yield d


@pytest.fixture(scope="module")
def daemon_a(workdir):
    d = Daemon(workdir, "a")
    yield d
    d.stop()


@pytest.fixture(scope="module")
def daemon_b(workdir):
    d = Daemon(workdir, "b")
    yield d
    d.stop()


_names = iter(range(1, 1 << 30))


@pytest.fixture
def unique():
    """A function giving names no other test of this run uses."""
    return lambda prefix="py": f"{prefix}-{os.getpid()}-{next(_names)}"


def run_python(code, *args, timeout=60, env=None, user=None, group=None):
    """Runs `code` in a new Debian python3 with this package importable
    (as `user` and `group`, given as ids, when set)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code, *args],
                          capture_output=True, text=True, timeout=timeout,
                          env=full_env, user=user, group=group,
                          extra_groups=[] if group is not None else None)
