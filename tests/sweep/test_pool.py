"""How a Ray job's outcome reads, for each way a job can end (Ray's exceptions, faked)."""

from __future__ import annotations

from types import SimpleNamespace

from rlhf.sweep.pool import _outcome


class RayError(Exception):
    pass


class RayTaskError(RayError):
    def __init__(self, cause: BaseException | None) -> None:
        super().__init__("a long traceback\nover lines")
        self.cause = cause


class WorkerCrashedError(RayError):
    pass


def _ray(result: object) -> SimpleNamespace:
    def get(ref: object) -> object:
        if isinstance(result, BaseException):
            raise result
        return result

    exceptions = SimpleNamespace(RayError=RayError, RayTaskError=RayTaskError)
    return SimpleNamespace(get=get, exceptions=exceptions)


def test_a_value_an_exception_and_a_dead_worker_each_read_as_one_line() -> None:
    assert _outcome(_ray(42), "ref", 3).value == 42
    raised = _outcome(_ray(RayTaskError(ValueError("bad\n  value"))), "ref", 3)
    assert raised.value is None and raised.error == "ValueError: bad value"
    died = _outcome(_ray(WorkerCrashedError("gone")), "ref", 3)
    assert died.error == "its worker died on each of 4 tries (WorkerCrashedError)"
    assert _outcome(_ray(WorkerCrashedError()), "ref", 0).error == (
        "its worker died once (WorkerCrashedError)"
    )
