"""The labelling page in Chromium: toasts never cover the progress text, on wide and narrow windows."""

from __future__ import annotations

import pytest

from tests.web.pages import Server, wait_playing

pytestmark = pytest.mark.browser

_BOXES = """() => {
  const box = (el) => { const r = el.getBoundingClientRect();
                        return [r.left, r.top, r.right, r.bottom]; };
  const toasts = [...document.querySelectorAll('#toasts .toast')].map(box);
  const progress = ['progress-text', 'outbox-text', 'progress', 'learning']
    .map((id) => document.getElementById(id)).filter((el) => el.offsetParent).map(box);
  return {toasts, progress};
}"""


def _intersect(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize("viewport", [(1100, 560), (380, 640)])
def test_toasts_never_cover_the_progress_text(
    serve: Server, browser, viewport: tuple[int, int]
) -> None:
    _, _, handle = serve(ready=4)
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    page = context.new_page()
    try:
        page.goto(handle.url)
        seen = 0
        for pair_id in (1, 2, 3):
            wait_playing(page, pair_id)
            page.keyboard.press("ArrowLeft")
            page.wait_for_selector("#toasts .toast")
            # The progress box at the bottom edge of the window: where a toast pinned over the
            # page used to sit.
            page.evaluate(
                "() => document.querySelector('.progress-box').scrollIntoView({block: 'end'})"
            )
            boxes = page.evaluate(_BOXES)
            assert boxes["toasts"] and boxes["progress"]
            for toast in boxes["toasts"]:
                for text in boxes["progress"]:
                    assert not _intersect(toast, text), (toast, text)
            seen += len(boxes["toasts"])
        assert seen >= 3
    finally:
        context.close()
