"""The labelling session: render worker, then server, then browser; stopped in reverse order."""

from __future__ import annotations

import json
import socket
import threading
import time
import types
from pathlib import Path

import pytest

import rlhf.feedback.session as session_mod
from rlhf.config import VideoConfig, WebConfig
from rlhf.core.shell import program
from rlhf.core.status import STATUS_KEY, Phase, TrainerStatus
from rlhf.core.types import Answer
from rlhf.feedback.session import LabellingSession, mark_no_trainer, serve_run, watch_command
from rlhf.render.worker import RenderWorker
from rlhf.store import LabelStore
from tests.server.wire import http_request as _http
from tests.support.children import gone

Run = tuple[LabelStore, Path]
_real_serve = session_mod.serve_in_thread


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class _Recorder:
    """Fake worker and server that write what happens to them into one shared list."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_server: bool = False) -> None:
        self.calls: list[str] = []
        calls = self.calls

        class FakeServer:
            url = "http://127.0.0.1:1234/"
            local_url = "http://127.0.0.1:1234"
            port = 1234
            labeller_urls = types.MappingProxyType({})  # no named labellers

            def stop(self, grace: float = 0.0) -> None:
                calls.append(f"server.stop({grace})")

        class FakeWorker:
            def __init__(self, store_path: Path, videos: Path, cfg: VideoConfig) -> None:
                calls.append(f"worker({Path(store_path).name}, {Path(videos).name})")

            def start(self) -> FakeWorker:
                calls.append("worker.start")
                return self

            def stop(self) -> None:
                calls.append("worker.stop")

        def fake_serve(store: LabelStore, videos: Path, cfg: WebConfig, **kw: object) -> object:
            calls.append("serve")
            if fail_server:
                raise OSError("address already in use")
            return FakeServer()

        monkeypatch.setattr(session_mod, "RenderWorker", FakeWorker)
        monkeypatch.setattr(session_mod, "serve_in_thread", fake_serve)
        monkeypatch.setattr(session_mod.webbrowser, "open", lambda url: calls.append("browser"))


def test_session_starts_worker_server_browser_and_stops_in_reverse(
    web_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = _Recorder(monkeypatch)
    said: list[str] = []
    run_root = web_run[1].parent
    session = LabellingSession(run_root, WebConfig(open_browser=True), VideoConfig(), said.append)
    assert session.start() is session
    assert rec.calls == ["worker(labels.sqlite, videos)", "worker.start", "serve", "browser"]
    assert said == [f"Label pairs of {run_root.name} in your browser: http://127.0.0.1:1234/"]
    session.stop(grace=2.5)
    assert rec.calls[4:] == ["server.stop(2.5)", "worker.stop"]
    session.stop()  # idempotent
    session.stop(grace=1.0)
    assert len(rec.calls) == 6
    with pytest.raises(RuntimeError):
        session.start()


def test_a_server_that_fails_to_start_stops_the_started_worker(
    web_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = _Recorder(monkeypatch, fail_server=True)
    session = LabellingSession(web_run[1].parent, WebConfig(), VideoConfig(), lambda _: None)
    with pytest.raises(OSError, match="in use"):
        session.start()
    assert rec.calls == ["worker(labels.sqlite, videos)", "worker.start", "serve", "worker.stop"]
    session.stop()  # nothing more to stop, and no error
    assert rec.calls[-1] == "worker.stop" and len(rec.calls) == 4


def test_a_real_session_serves_and_stop_releases_port_and_worker(web_run: Run) -> None:
    store, videos = web_run
    session = LabellingSession(videos.parent, WebConfig(), VideoConfig(), lambda _: None)
    with session:
        port = int(session.local_url.rsplit(":", 1)[1])
        assert session.url == f"http://127.0.0.1:{port}/"
        status, _, body = _http(port, "GET", "/api/status")
        assert status == 200 and json.loads(body)["watch_command"].startswith(
            program("tensorboard")
        )
        assert _http(port, "POST", "/api/label", {"pair_id": 1, "answer": "left"})[0] == 200
        assert session.worker is not None
        pid = session.worker.pid
        assert pid is not None and not gone(pid)
    assert _port_is_free(port)
    assert gone(pid)
    session.stop(grace=5.0)  # a second stop, even with a grace period, does nothing
    assert [lb.pair_id for lb in store.labels()] == [1]


def test_a_taken_port_stops_the_real_worker_again(
    web_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids: list[int] = []
    original = RenderWorker.start

    def start(self: RenderWorker) -> RenderWorker:
        original(self)
        pids.append(self.pid)  # type: ignore[arg-type]
        return self

    monkeypatch.setattr(RenderWorker, "start", start)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        cfg = WebConfig(port=taken.getsockname()[1])
        with pytest.raises(OSError):
            LabellingSession(web_run[1].parent, cfg, VideoConfig(), lambda _: None).start()
    assert len(pids) == 1 and gone(pids[0])


def test_watch_command_is_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    board = program("tensorboard")  # the form that runs from here (see tests/test_printed_commands)
    assert watch_command(tmp_path / "runs") == f"{board} --logdir runs"
    assert watch_command(Path("/somewhere else")) == f"{board} --logdir '/somewhere else'"


# -- serve_run ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("stored", "phase"),
    [
        (None, Phase.NO_TRAINER),
        (TrainerStatus(Phase.TRAINING, iteration=4), Phase.NO_TRAINER),
        (TrainerStatus(Phase.FINISHED, iteration=9), Phase.FINISHED),
        (
            TrainerStatus(Phase.INTERRUPTED, resume_command="rlhf train --resume x"),
            Phase.INTERRUPTED,
        ),
    ],
)
def test_no_trainer_is_marked_unless_the_run_ended(
    web_run: Run, stored: TrainerStatus | None, phase: Phase
) -> None:
    store, _ = web_run
    if stored is not None:
        store.set_meta(STATUS_KEY, stored.to_json())
    mark_no_trainer(store)
    status = TrainerStatus.from_json(store.get_meta(STATUS_KEY))
    assert status is not None and status.phase is phase
    if stored is not None:
        assert status.iteration == stored.iteration
        assert status.resume_command == stored.resume_command


def test_serve_run_serves_a_run_until_stopped(
    web_run: Run, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = _Recorder(monkeypatch)
    monkeypatch.setattr(session_mod, "serve_in_thread", _real_serve)  # only the worker is fake
    store, videos = web_run
    (videos.parent / "config.json").write_text(json.dumps({"query": {"total_labels": 40}}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    stop = threading.Event()
    thread = threading.Thread(
        target=serve_run,
        args=(videos.parent, WebConfig(port=port), VideoConfig()),
        kwargs={"stop": stop},
    )
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                status, _, body = _http(port, "GET", "/api/status")
                break
            except OSError:
                assert time.monotonic() < deadline, "the server never answered"
                time.sleep(0.05)
        payload = json.loads(body)
        assert status == 200 and payload["labels_requested"] == 40
        assert payload["phase"] == Phase.NO_TRAINER.value and payload["closing"] is False
        status, _, _ = _http(port, "POST", "/api/label", {"pair_id": 2, "answer": "right"})
        assert status == 200
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()
    assert rec.calls == ["worker(labels.sqlite, videos)", "worker.start", "worker.stop"]
    out = capsys.readouterr().out
    assert f"http://127.0.0.1:{port}/  (Ctrl-C to stop)" in out and out.count("\n") == 1
    assert [(lb.pair_id, lb.answer) for lb in store.labels()] == [(2, Answer.RIGHT)]
    with pytest.raises(OSError):
        _http(port, "GET", "/api/status")


def test_serve_run_refuses_a_directory_without_a_store(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"labels\.sqlite"):
        serve_run(tmp_path, WebConfig(), VideoConfig())


def test_a_run_is_served_again_on_its_port_while_it_is_free(
    web_run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tab left open on a run reconnects when the run is resumed (or served): same address."""

    class Worker:
        def __init__(self, *args: object) -> None:
            pass

        def start(self) -> Worker:
            return self

        def stop(self) -> None:
            pass

    monkeypatch.setattr(session_mod, "RenderWorker", Worker)
    root = web_run[1].parent

    def port_of_a_session() -> int:
        with LabellingSession(root, WebConfig(), VideoConfig(), lambda _: None) as session:
            return session.server.port

    first = port_of_a_session()
    assert port_of_a_session() == first
    with socket.socket() as taken:  # someone else has it now: any free port will do
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", first))
        taken.listen()
        other = port_of_a_session()
    assert other != first
    assert port_of_a_session() == other  # the port it was last served on
