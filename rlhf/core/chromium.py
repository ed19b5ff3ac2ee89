"""Helpers shared by the browser tests and the web benchmark (not used by the app itself)."""

from __future__ import annotations

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium: Playwright drives it and never downloads a browser of its own."""

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    # Without these, a machine with no network sees Chromium's background connections refused.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""Launch flags for headless Chromium as root on a machine without a GPU or a network."""
