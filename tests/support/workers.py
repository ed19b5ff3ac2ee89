"""How the suite shares the machine when scripts/test.sh runs it on several workers (xdist)."""

from __future__ import annotations

import pytest

RAY = pytest.mark.xdist_group("ray")
"""Tests that start a Ray (a local one, a head node, or a bench's): one test worker runs them
all, one after another (``--dist loadgroup``). Ray runs its workers at nice 15, where a Ray test
beside two busy processes gets next to no CPU (measured: an 18 s sweep test took 315 s), so
tests/conftest.py sets ``RAY_worker_niceness=0`` for the suite."""
