"""The page when the trainer's disk is full: it says so, stops retrying, keeps the answer, and
sends it again when the person asks (after freeing space)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from rlhf.core.types import Answer
from tests.web.pages import Server, wait_for, wait_playing

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser


def test_a_full_disk_is_said_on_the_page_and_not_retried_forever(
    serve: Server, page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _, handle = serve(ready=2)
    tries = []

    def full(*args, **kwargs):
        tries.append(args)
        raise sqlite3.OperationalError("database or disk is full")

    page.goto(handle.url)
    wait_playing(page, 1)
    monkeypatch.setattr(store, "add_label", full)
    page.keyboard.press("ArrowLeft")
    page.wait_for_function(
        "() => document.getElementById('overlay-text').textContent"
        '.includes("The trainer\'s disk is full")',
        timeout=8000,
    )
    assert page.is_visible("#btn-resend")
    assert "disk is full" in (page.text_content("#outbox-text") or "")
    page.wait_for_timeout(3000)  # a page retrying with backoff would have tried again by now
    assert len(tries) == 1
    page.keyboard.press("ArrowRight")  # no more answers while nothing can be saved
    page.wait_for_timeout(300)
    assert len(tries) == 1
    monkeypatch.undo()  # space freed
    page.click("#btn-resend")
    wait_for(page, lambda: {lb.pair_id: lb.answer for lb in store.labels()} == {1: Answer.LEFT})
    page.wait_for_selector("#btn-resend", state="hidden")
    wait_playing(page, 2)
