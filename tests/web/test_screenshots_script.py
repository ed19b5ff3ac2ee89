"""scripts/screenshots.py, which takes the labelling guide's screenshots from real runs: it
answers --help (a real run of it takes minutes, so it is not run here), and every PNG it writes
is in docs/images, small, and shown by the guide, which says how to make them again."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "screenshots.py"
GUIDE = [ROOT / "docs" / "guide" / name for name in ("labelling.md", "ratings.md")]


def test_the_script_answers_help() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "--out" in result.stdout and "--quick" in result.stdout


def test_the_guide_shows_every_screenshot_the_script_writes() -> None:
    shots = set(re.findall(r'"(page_\w+\.png)"', SCRIPT.read_text()))
    assert len(shots) == 4, shots
    guide = "\n".join(page.read_text() for page in GUIDE)
    for name in shots:
        png = ROOT / "docs" / "images" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert png.stat().st_size < 300_000, f"{name}: {png.stat().st_size} bytes"
        assert f"](../images/{name})" in guide, f"the guide does not show {name}"
    assert "scripts/screenshots.py" in guide  # how to make them again
