"""Something with a life: ``start()`` brings it up, ``stop()`` ends it, and ``with`` does both."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Service:
    """Started by ``start()`` (which returns it) and ended by ``stop()`` with its defaults; as a
    context manager, ``with Thing(...) as thing`` starts it and leaving the block stops it."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
