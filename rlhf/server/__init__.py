"""The labelling web server: a small JSON API over the label store, plus the page in ``web/``.

The server shares nothing with the trainer but the store (``labels.sqlite``): it hands out pairs
whose videos the render worker has marked ready, and writes each answer durably before it replies.

- :mod:`~rlhf.server.app`: the app factory and JSON errors;
- :mod:`~rlhf.server.api`: the JSON API blueprint;
- :mod:`~rlhf.server.access`: token, loopback ``Host`` and ``Origin`` checks, headers, cookies;
- :mod:`~rlhf.server.leases` and :mod:`~rlhf.server.pages`: who holds which pair, which pages
  still hold answers at the end of a run;
- :mod:`~rlhf.server.openapi`: the API as an OpenAPI document (``/api/openapi.json``);
- :mod:`~rlhf.server.serve` and :mod:`~rlhf.server.wire`: waitress in a daemon thread, its own
  HTTP errors answered as JSON too;
- :mod:`~rlhf.server.guard`: a connection budget per client address and a time limit on slow
  requests, so a flood of half-open connections locks no labeller out.

Security defaults: bind 127.0.0.1; on any other interface a random token is required. There is
no CORS and no debugger, videos are served by pair id only, and every error is JSON. No client's
input can fail another client's request: ids are checked before they reach SQLite, each label
commits in its own savepoint, and only real ready pairs can be leased.
"""

from rlhf.server.access import LABELLER_COOKIE, TOKEN_COOKIE, is_loopback
from rlhf.server.app import create_app, web_dir
from rlhf.server.payloads import status_payload
from rlhf.server.serve import ServerHandle, serve_in_thread

__all__ = [
    "LABELLER_COOKIE",
    "TOKEN_COOKIE",
    "ServerHandle",
    "create_app",
    "is_loopback",
    "serve_in_thread",
    "status_payload",
    "web_dir",
]
