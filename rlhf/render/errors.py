"""One-line error reasons, as the store and the page show them."""

from __future__ import annotations


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, cut to ``limit`` characters (for the store and the UI)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
