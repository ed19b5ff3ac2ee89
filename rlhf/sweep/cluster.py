"""Connecting to a Ray cluster that is already running (``rlhf sweep --address``).

Ray 2.60's ``ray start --head`` turns on token authentication whenever this user has a token
(``~/.ray/auth_token``, which any local ``ray.init()`` or ``ray get-auth-token --generate``
writes), but ``ray.init(address=HOST:PORT)`` sends a token only when ``RAY_AUTH_MODE=token`` is
set; without it Ray retries for 20 s and ends with ``Failed to connect to Ray cluster``, which
does not say why. So before ``ray.init`` one gRPC call (``GetClusterId``, the first call Ray's
own client makes) asks the cluster's GCS at the address:

- no answer: nothing listens there, said in one line at once;
- answered without a token: the cluster has no token authentication; connect as is;
- refused without a token: the cluster wants one. The token is taken where Ray itself looks for
  it (``$RAY_AUTH_TOKEN``, else the file ``$RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``),
  checked with a second call, and token mode is turned on for this process while it is
  connected (``RAY_AUTH_MODE=token``, as Ray does itself for ``address="auto"``). A missing or
  refused token is said in one line, with where to get the right one.

Ray Client addresses (``ray://``) are left to Ray.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlhf.config import ConfigError

AUTH_MODE = "RAY_AUTH_MODE"
TOKEN_VAR = "RAY_AUTH_TOKEN"
TOKEN_PATH_VAR = "RAY_AUTH_TOKEN_PATH"
PROBE = "/ray.rpc.NodeInfoGcsService/GetClusterId"
PROBE_TIMEOUT = 5.0
"""Seconds the probe waits for an answer (a refused connection fails at once)."""


@dataclass(frozen=True)
class Cluster:
    """Where ``ray.init`` connects, and whether it must send a token (and whose)."""

    address: str
    """What ``ray.init`` gets: the address as given."""
    target: str
    """HOST:PORT that Ray dials for it."""
    token_from: str | None = None
    """Where the token came from (``~/.ray/auth_token``, ``RAY_AUTH_TOKEN``...); None: none sent."""


def find_cluster(address: str, named: str) -> Cluster:
    """Check that a Ray cluster answers at ``address`` and that it accepts this user's token.

    ``named`` is how the address reads in messages (``--address X`` or ``RAY_ADDRESS=X``).

    Raises:
        ConfigError: one line naming the cause and the fix.
    """
    if address.startswith("ray://"):
        return Cluster(address, address)
    target = _canonical(address, named)
    status, details = _probe(target, None)
    if status == "OK":
        return Cluster(address, target)
    if status != "UNAUTHENTICATED":
        raise ConfigError(_no_cluster(target, named, status, details))
    mode = os.environ.get(AUTH_MODE)
    if mode is not None and mode.lower() != "token":
        raise ConfigError(
            f"{named}: the cluster at {target} uses token authentication and {AUTH_MODE}={mode}"
            f" is set here; unset it (or set {AUTH_MODE}=token)"
        )
    token, source = _token(named, target)
    status, details = _probe(target, token)
    if status == "UNAUTHENTICATED":
        raise ConfigError(
            f"{named}: the cluster at {target} refused the token from {source}; use the token"
            f" of the cluster (`ray get-auth-token` on its head node prints it) in"
            f" ~/.ray/auth_token or ${TOKEN_VAR}"
        )
    if status != "OK":
        raise ConfigError(_no_cluster(target, named, status, details))
    return Cluster(address, target, source)


@contextlib.contextmanager
def token_mode(cluster: Cluster) -> Iterator[None]:
    """Ray's token mode on for this process (and Ray's C++ core) while the block runs, when
    ``cluster`` wants a token; as it was afterwards."""
    before = os.environ.get(AUTH_MODE)
    if cluster.token_from is None or (before or "").lower() == "token":
        yield
        return
    from ray._raylet import AuthenticationTokenLoader, Config

    os.environ[AUTH_MODE] = "token"
    Config.initialize("")  # Ray's cached config reads the mode again (as Ray's own switch does)
    AuthenticationTokenLoader.instance().reset_cache()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(AUTH_MODE, None)
        else:
            os.environ[AUTH_MODE] = before
        Config.initialize("")
        AuthenticationTokenLoader.instance().reset_cache()


def _canonical(address: str, named: str) -> str:
    """HOST:PORT as ``ray.init`` will dial it ("auto": the cluster ``ray start`` last started
    here; a local name: this node's address)."""
    from ray._private import services

    try:
        target = services.canonicalize_bootstrap_address(address)
    except ConnectionError:  # "auto" and no cluster runs here
        raise ConfigError(
            f"{named}: no Ray cluster is running on this machine; start one with"
            " `ray start --head`, or give its HOST:PORT"
        ) from None
    except Exception as exc:  # a malformed address, a host name that does not resolve
        raise ConfigError(
            f"{named}: not a Ray address ({' '.join(str(exc).split())}); give the HOST:PORT"
            " that `ray start --head` printed (port 6379 by default)"
        ) from None
    return target or address


def _probe(target: str, token: str | None) -> tuple[str, str]:
    """The gRPC status name (``OK``, ``UNAUTHENTICATED``, ``UNAVAILABLE``...) of one call to
    the GCS at ``target``, and its details."""
    import grpc

    metadata = None if token is None else [("authorization", f"Bearer {token}")]
    # No proxy: the GCS is dialled directly, as Ray's own client does.
    with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
        call = channel.unary_unary(PROBE)  # an empty request: the message's fields all unset
        try:
            call(b"", timeout=PROBE_TIMEOUT, metadata=metadata)
        except grpc.RpcError as exc:
            code: Any = exc.code()  # type: ignore[attr-defined]
            name = code.name if isinstance(code, grpc.StatusCode) else str(code)
            return name, " ".join(str(exc.details()).split())  # type: ignore[attr-defined]
    return "OK", ""


def _token(named: str, target: str) -> tuple[str, str]:
    """This user's token as Ray finds it, and where it came from."""
    from ray._raylet import AuthenticationTokenLoader

    loader = AuthenticationTokenLoader.instance()
    loader.reset_cache()  # the environment may have changed since Ray last looked
    source = _token_source()
    try:
        token = (
            loader.get_raw_token(ignore_auth_mode=True)
            if loader.has_token(ignore_auth_mode=True)
            else None
        )
    except Exception:  # Ray's AuthenticationError: $RAY_AUTH_TOKEN_PATH unreadable or empty
        raise ConfigError(
            f"{named}: the cluster at {target} uses token authentication and {source} cannot be"
            f" read or is empty; point ${TOKEN_PATH_VAR} at the cluster's token file"
        ) from None
    if not token:
        raise ConfigError(
            f"{named}: the cluster at {target} uses token authentication and no token was found"
            f" (${TOKEN_VAR}, ${TOKEN_PATH_VAR}, ~/.ray/auth_token); copy the cluster's token"
            " (`ray get-auth-token` on its head node prints it) into ~/.ray/auth_token, or set"
            f" ${TOKEN_VAR}"
        )
    return token, source


def _token_source() -> str:
    """Where Ray takes the token from, in Ray's order."""
    if os.environ.get(TOKEN_VAR):
        return f"${TOKEN_VAR}"
    path = os.environ.get(TOKEN_PATH_VAR)
    if path:
        return f"${TOKEN_PATH_VAR} ({path})"
    return str(Path("~") / ".ray" / "auth_token")


def _no_cluster(target: str, named: str, status: str, details: str) -> str:
    host, _, port = target.rpartition(":")
    if status == "UNAVAILABLE" and ("resolv" in details or "lookup" in details):
        return (
            f"{named}: the host name {host} does not resolve; give the HOST:PORT that"
            " `ray start --head` printed (port 6379 by default)"
        )
    if status == "UNAVAILABLE":  # "...: Connection refused": the last part is the cause
        cause = details.rpartition(": ")[2].strip(" .]").lower()
        return (
            f"{named}: nothing answers at {target} ({cause}); start the cluster there with"
            f" `ray start --head --port {port}`, or give the address that `ray start` printed"
        )
    if status == "DEADLINE_EXCEEDED":
        return (
            f"{named}: no answer from {target} within {PROBE_TIMEOUT:.0f}s; check the host and"
            " that a firewall lets this machine reach the port"
        )
    return (
        f"{named}: {target} answers, but not as a Ray cluster ({status}: {details}); give the"
        " HOST:PORT that `ray start --head` printed (port 6379 by default)"
    )
