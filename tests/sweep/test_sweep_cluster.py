"""``rlhf sweep --address`` against a real head node started with ``ray start --head``.

The head node runs on loopback only, in its own temp dir and with its own HOME (whose
``~/.ray/auth_token`` makes Ray 2.60's ``ray start --head`` turn token authentication on), and the
test stops exactly it (SIGTERM to its ``ray start --block``, which shuts its processes down).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.workers import RAY

pytest.importorskip("ray")

from tests.sweep.test_sweep_ray import ROOT
from tests.sweep.test_sweep_ray import SPEC as TOY_SPEC

pytestmark = RAY

# test_sweep_ray's toy grid, one seed: two cells of 512 steps.
SPEC = TOY_SPEC.format(steps=512).replace("seeds = [1, 2]", "seeds = [1]")
TOKEN = "0123456789abcdef" * 4


@dataclass(frozen=True)
class Head:
    address: str
    env: dict[str, str]
    """The environment of a user of this head node: its HOME, no RAY_* variable set by hand."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _user_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # Ray binds its node to loopback only, instead of turning 127.0.0.1 into this machine's
    # network address and listening on every interface.
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    return {**env, "HOME": str(home), "MUJOCO_GL": "egl"}


@pytest.fixture(scope="module")
def head(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Head]:
    home = tmp_path_factory.mktemp("home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(TOKEN)  # as ray.init() writes it for this user
    temp = tempfile.mkdtemp(prefix="rlhf-ray-")  # short: Ray's sockets live under it
    port = _free_port()
    env = _user_env(home)
    server_env = {**env, "DASHBOARD_METRIC_PORT": "0", "AUTOSCALER_METRIC_PORT": "0"}
    log = home / "ray-start.log"
    ray = Path(sys.executable).with_name("ray")
    command = [
        str(ray), "start", "--head", "--block", "--port", str(port),
        "--node-ip-address", "127.0.0.1", "--num-cpus", "2", "--temp-dir", temp,
        "--include-dashboard", "false", "--dashboard-port", str(_free_port()),
        "--ray-client-server-port", str(_free_port()), "--disable-usage-stats",
    ]  # fmt: skip
    with log.open("w") as out:
        started = subprocess.Popen(
            command, cwd=home, env=server_env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "will now block forever" not in log.read_text():
            if started.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"ray start --head did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield Head(f"127.0.0.1:{port}", env)
    finally:
        started.send_signal(signal.SIGTERM)  # ray start --block stops its node's processes
        try:
            started.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(started.pid, signal.SIGKILL)  # its own session: only what it started
            started.wait()
        shutil.rmtree(temp, ignore_errors=True)


def _sweep(address: str, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    spec = tmp_path / "grid.toml"
    spec.write_text(SPEC)
    return subprocess.run(
        [sys.executable, "-m", "rlhf", "sweep", str(spec), "--sweep-dir", str(tmp_path / "out"),
         "--address", address],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_sweep_runs_on_a_head_node_with_token_auth_using_the_users_token(
    head: Head, tmp_path: Path
) -> None:
    done = _sweep(head.address, tmp_path, head.env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"cluster at {head.address}, token from ~/.ray/auth_token: 2 CPUs" in done.stderr
    rows = (tmp_path / "out" / "results.csv").read_text().splitlines()
    assert len(rows) == 3 and all(",finished," in row for row in rows[1:]), rows


@pytest.mark.parametrize("token", ["wrong", "none"])
def test_a_token_the_cluster_refuses_or_no_token_is_one_line_and_exit_code_2(
    head: Head, tmp_path: Path, token: str
) -> None:
    if token == "wrong":
        env = {**head.env, "RAY_AUTH_TOKEN": "not-the-token"}
        cause = "refused the token from $RAY_AUTH_TOKEN; use the token of the cluster"
    else:  # a user without ~/.ray/auth_token
        env = {**head.env, "HOME": str(tmp_path)}
        cause = "uses token authentication and no token was found ($RAY_AUTH_TOKEN,"
    start = time.monotonic()
    done = _sweep(head.address, tmp_path, env)
    took = time.monotonic() - start
    assert done.returncode == 2, done.stderr[-3000:]
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"rlhf: error: --address {head.address}: the cluster at "), line
    assert cause in line and "`ray get-auth-token` on its head node" in line, line
    assert took < 15, took  # not Ray's 20 s of retries
    assert not (tmp_path / "out").exists()


def test_nothing_listening_at_the_address_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    port = _free_port()
    start = time.monotonic()
    done = _sweep(f"127.0.0.1:{port}", tmp_path, _user_env(tmp_path))
    took = time.monotonic() - start
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.splitlines() == [
        f"rlhf: error: --address 127.0.0.1:{port}: nothing answers at 127.0.0.1:{port}"
        f" (connection refused); start the cluster there with `ray start --head --port {port}`,"
        " or give the address that `ray start` printed"
    ]
    assert took < 15, took
    assert not (tmp_path / "out").exists()


def test_token_mode_is_on_while_connected_to_a_cluster_that_wants_a_token_and_off_after() -> None:
    from ray._raylet import AuthenticationMode, Config, get_authentication_mode

    from rlhf.sweep.cluster import Cluster, token_mode

    before = os.environ.pop("RAY_AUTH_MODE", None)  # a local ray.init() earlier sets it
    Config.initialize("")
    try:
        with token_mode(Cluster("127.0.0.1:1", "127.0.0.1:1")):  # no token wanted: as it was
            assert "RAY_AUTH_MODE" not in os.environ
        with token_mode(Cluster("127.0.0.1:1", "127.0.0.1:1", "~/.ray/auth_token")):
            assert os.environ["RAY_AUTH_MODE"] == "token"
            assert get_authentication_mode() == AuthenticationMode.TOKEN
        assert "RAY_AUTH_MODE" not in os.environ
        assert get_authentication_mode() == AuthenticationMode.DISABLED
    finally:
        if before is not None:
            os.environ["RAY_AUTH_MODE"] = before
        Config.initialize("")  # Ray's cached mode as the environment says again
