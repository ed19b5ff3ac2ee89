"""Fixtures of the benchmark tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: Ray puts its Unix sockets under ``$TMPDIR``, and
    a socket's path may be at most 107 bytes (pytest's ``tmp_path`` can be too long)."""
    path = Path(tempfile.mkdtemp(prefix="bench-", dir="/tmp" if Path("/tmp").is_dir() else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)
