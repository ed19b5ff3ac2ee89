"""Access control: the token, the loopback ``Host`` check, the ``Origin`` check, security headers
and the labeller cookie.

Without a token only loopback ``Host`` headers are answered (DNS rebinding); with one, every
request must carry it (``?token=`` on the page URL, then an HttpOnly SameSite=Strict cookie, or a
Bearer header). The page sends its own URL's token as a Bearer header on every API call, which
wins over the cookie: a browser has one cookie, so with two named labellers' tabs in it the
cookie is the last link opened, and only videos (which cannot send a header) rely on it.
Cross-origin POSTs are refused (CSRF): their ``Origin`` must be this server's
scheme, host and port exactly, and a browser's ``Sec-Fetch-Site`` must say same-origin. There is
no CORS.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from urllib.parse import urlsplit

from flask import Flask, Response, g, request

from rlhf.server.state import ApiError, server_state

TOKEN_COOKIE = "rlhf_token"
LABELLER_COOKIE = "rlhf_labeller"
_LABELLER_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "media-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


def install(app: Flask) -> None:
    """Check every request before any view runs, and add the headers to every response."""
    app.before_request(check_access)
    app.after_request(finish_response)


def is_loopback(host: str) -> bool:
    """True for names and addresses that only this machine can reach."""
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hostname(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:port
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _supplied_token() -> tuple[str | None, bool]:
    """The token this request carries, and whether it came in the query string."""
    if "token" in request.args:
        return request.args.get("token", ""), True
    auth = request.headers.get("Authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip(), False
    return request.cookies.get(TOKEN_COOKIE), False


def check_access() -> None:
    state = server_state()
    if state.stopped:
        raise ApiError(503, "stopped", "The labelling server is shutting down.")
    if state.labellers is not None:
        _check_labeller_token(state.labellers)
    elif state.token is None:
        # No token means loopback only: refuse foreign Host headers (DNS rebinding).
        if not is_loopback(_hostname(request.host)):
            raise ApiError(403, "forbidden_host", "This server only answers on localhost.")
    else:
        supplied, from_query = _supplied_token()
        if not supplied:
            raise ApiError(
                401, "token_required", "Open the URL printed in the terminal (with ?token=)."
            )
        if not secrets.compare_digest(supplied.encode(), state.token.encode()):
            raise ApiError(403, "bad_token", "Wrong access token.")
        g.set_token_cookie = from_query
    if request.method not in ("GET", "HEAD", "OPTIONS") and not _same_origin():
        raise ApiError(403, "cross_origin", "Cross-origin requests are not allowed.")


def _check_labeller_token(labellers: dict[str, str]) -> None:
    """Named labellers: the request must carry one labeller's token, which says who it is."""
    supplied, from_query = _supplied_token()
    if not supplied:
        raise ApiError(401, "token_required", "Open your own link, printed in the terminal.")
    # Compare with every token (not a dict lookup) so the time taken says nothing about them.
    found = None
    for token, name in labellers.items():
        if secrets.compare_digest(supplied.encode(), token.encode()):
            found = name
    if found is None:
        raise ApiError(403, "bad_token", "Wrong access token.")
    g.labeller = found
    g.labeller_token = supplied
    g.set_token_cookie = from_query


# What browsers send in Sec-Fetch-Site for a request a page of this origin made, or that the
# person made themselves (typed URL, bookmark). "same-site" includes other ports of localhost.
_OWN_FETCH_SITES = {"same-origin", "none"}


def _same_origin() -> bool:
    """False for a state-changing request that a browser says came from another origin."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site.strip().lower() not in _OWN_FETCH_SITES:
        return False
    origin = request.headers.get("Origin")
    if not origin:  # not a browser, or one too old to say: the token and Host checks apply
        return True
    own = _origin_key(f"{request.scheme}://{request.host}")
    return own is not None and _origin_key(origin) == own


def _origin_key(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin, default port filled in; None if it is malformed."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:  # "http://[", a port out of range...
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def finish_response(resp: Response) -> Response:
    state = server_state()
    cookie_token = g.get("labeller_token") or state.token
    if g.get("set_token_cookie") and cookie_token:
        resp.set_cookie(TOKEN_COOKIE, cookie_token, httponly=True, samesite="Strict", path="/")
    if g.get("new_labeller"):
        resp.set_cookie(
            LABELLER_COOKIE, g.labeller, httponly=True, samesite="Strict", path="/",
            max_age=365 * 24 * 3600,
        )  # fmt: skip
    resp.headers.setdefault("X-Content-Type-Options", "nosniff")
    resp.headers.setdefault("Referrer-Policy", "no-referrer")
    resp.headers.setdefault("X-Frame-Options", "DENY")
    resp.headers.setdefault("Content-Security-Policy", _CSP)
    if request.path.startswith("/api/"):
        resp.headers["Cache-Control"] = "no-store"
    return resp


def labeller(create: bool = True) -> str | None:
    """This browser's labeller id (cookie); a new one is issued on first use."""
    if "labeller" in g:
        return g.labeller
    value = request.cookies.get(LABELLER_COOKIE, "")
    if _LABELLER_RE.match(value):
        g.labeller = value
    elif create:
        g.labeller = secrets.token_urlsafe(12)
        g.new_labeller = True
    else:
        return None
    return g.labeller
