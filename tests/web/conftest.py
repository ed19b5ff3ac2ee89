"""The browser tests' page fixtures (tests/web/pages.py), for every module here."""

from tests.web.pages import browser, page, pair_assets, serve  # noqa: F401
