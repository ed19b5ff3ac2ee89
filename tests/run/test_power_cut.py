"""Acknowledged labels survive a power cut, not only a killed process.

A SIGKILL leaves the OS page cache intact, so it cannot tell a store that syncs from one that does
not. Here the child runs under an LD_PRELOAD shim (``fsync_shim.c``) that copies a watched file to a
shadow directory whenever it is fsync'ed: the shadow is what a disk would hold after the power
went. After the kill the test reads the shadow, never the live files.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlhf.core.types import Answer
from rlhf.store import LabelStore
from tests.support.labelling import shown_pairs

ANSWERS = list(Answer)
SHIM_SOURCE = Path(__file__).resolve().parents[1] / "support" / "fsync_shim.c"

# The child may turn the store's durability down (the negative control). This patch lives in the
# test only: production code has no knob for it.
_WEAKEN = """
    import sys
    from rlhf.store.connection import StoreConnections
    synchronous = sys.argv[2]
    if synchronous != "FULL":
        original = StoreConnections._con
        def _weakened(self):
            con = original(self)
            con.execute(f"PRAGMA synchronous={synchronous}")
            return con
        StoreConnections._con = _weakened
"""

_ADD_LABELS = (
    _WEAKEN
    + """
    from rlhf.store import LabelStore
    from rlhf.core.types import Answer
    answers = list(Answer)
    store = LabelStore(sys.argv[1] + "/labels.sqlite")
    for pair_id in range(1, 1000):
        store.add_label(pair_id, answers[pair_id % 4], labeller="child")
        print(f"ACK {pair_id}", flush=True)
"""
)

_SERVE = (
    _WEAKEN
    + """
    import time
    from pathlib import Path
    from rlhf.config import WebConfig
    from rlhf.server import serve_in_thread
    from rlhf.store import LabelStore
    run = Path(sys.argv[1])
    handle = serve_in_thread(LabelStore(run / "labels.sqlite"), run / "videos", WebConfig())
    print(f"PORT {handle.port}", flush=True)
    while True:
        time.sleep(1)
"""
)


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if sys.platform != "linux":
        pytest.skip("the fsync shim needs LD_PRELOAD and /proc/self/fd (Linux)")
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed: the power-cut test builds its fsync shim with it")
    out = tmp_path_factory.mktemp("shim") / "fsync_shim.so"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O1", "-o", str(out), str(SHIM_SOURCE), "-ldl"], check=True
    )
    return out


def _spawn(code: str, run: Path, shadow: Path, shim: Path, synchronous: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "LD_PRELOAD": str(shim),
        "FSYNC_SHIM_WATCH": str(run.resolve()),
        "FSYNC_SHIM_SHADOW": str(shadow.resolve()),
    }
    return subprocess.Popen(
        [sys.executable, "-u", "-c", textwrap.dedent(code), str(run), synchronous],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _acks_over_store(child: subprocess.Popen, count: int) -> list[int]:
    acked: list[int] = []
    for line in child.stdout:  # type: ignore[union-attr]
        acked.append(int(line.split()[1]))
        if len(acked) == count:
            child.send_signal(signal.SIGKILL)  # the power goes right after this acknowledgement
            break
    return acked


def _acks_over_http(child: subprocess.Popen, count: int) -> list[int]:
    first = child.stdout.readline()  # type: ignore[union-attr]
    assert first.startswith("PORT "), first + child.stderr.read()  # type: ignore[union-attr]
    con = http.client.HTTPConnection("127.0.0.1", int(first.split()[1]), timeout=10)
    acked: list[int] = []
    for pair_id in range(1, count + 1):
        body = json.dumps({"pair_id": pair_id, "answer": ANSWERS[pair_id % 4].value})
        con.request("POST", "/api/label", body, {"Content-Type": "application/json"})
        resp = con.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["saved"] is True
        acked.append(pair_id)
    child.send_signal(signal.SIGKILL)  # the power goes right after the last 200
    con.close()
    return acked


def _lost_in_power_cut(
    tmp_path: Path, add_pairs, shim: Path, synchronous: str, via: str, count: int = 25
) -> list[int]:
    """Acknowledge ``count`` labels in a child, cut its power; the acknowledged ids now missing."""
    run, shadow, after = (tmp_path / d for d in ("run", "shadow", "after"))
    for d in (run, shadow, after, run / "videos"):
        d.mkdir()
    store = LabelStore(run / "labels.sqlite")
    shown_pairs(store, add_pairs, count + 20)
    store.close()
    # The pairs were on disk before the child started (closing checkpointed and synced them).
    shutil.copy(run / "labels.sqlite", shadow / "labels.sqlite")

    child = _spawn(_ADD_LABELS if via == "store" else _SERVE, run, shadow, shim, synchronous)
    try:
        acked = (_acks_over_store if via == "store" else _acks_over_http)(child, count)
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        child.wait(10)
        stderr = child.stderr.read()  # type: ignore[union-attr]
        child.stdout.close()  # type: ignore[union-attr]
        child.stderr.close()  # type: ignore[union-attr]
    assert child.returncode == -signal.SIGKILL, stderr
    assert acked == list(range(1, count + 1)), stderr

    for name in ("labels.sqlite", "labels.sqlite-wal"):  # what the disk kept; -shm is rebuilt
        if (shadow / name).exists():
            shutil.copy(shadow / name, after / name)
    survivor = LabelStore(after / "labels.sqlite")
    stored = {lb.pair_id: lb.answer for lb in survivor.labels()}
    survivor.close()
    return [p for p in acked if stored.get(p) != ANSWERS[p % 4]]


@pytest.mark.parametrize("via", ["store", "http"])
def test_acknowledged_labels_survive_a_power_cut(
    tmp_path: Path, add_pairs, shim: Path, via: str
) -> None:
    lost = _lost_in_power_cut(tmp_path, add_pairs, shim, "FULL", via)
    assert lost == [], f"{len(lost)} acknowledged labels lost in the power cut: {lost}"


@pytest.mark.parametrize(
    ("synchronous", "via"), [("OFF", "store"), ("NORMAL", "store"), ("OFF", "http")]
)
def test_the_power_cut_catches_a_store_that_does_not_sync(
    tmp_path: Path, add_pairs, shim: Path, synchronous: str, via: str
) -> None:
    """The negative control: with the commit-time sync turned off, acknowledged labels do vanish.

    OFF never syncs; NORMAL in WAL mode syncs only at checkpoints, so an acknowledged commit may
    still be in the page cache. Without this test the one above could pass by never looking.
    """
    lost = _lost_in_power_cut(tmp_path, add_pairs, shim, synchronous, via)
    assert lost, "the shim saw no loss: it no longer models a power cut"
