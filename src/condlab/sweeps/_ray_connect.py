"""Reaching a Ray cluster fast or saying why not: the address probe and token authentication.

``ray.init(address=...)`` waits without end for a head that does not answer (seen: stopped
after 537 s), so the address is probed first, within ``PROBE_SECONDS`` in all: a TCP connect to
the head's GCS port, then the HTTP/2 connection preface that every gRPC server (the GCS is
one) answers with a SETTINGS frame. A refused, silent or non-gRPC address is one line naming
it. Ray 2.60 enables token authentication for a local ``ray.init()`` cluster and saves its
token in ~/.ray/auth_token; a head started later with ``ray start`` then requires it, while
``ray.init(address=...)`` does not send it unless RAY_AUTH_MODE=token: ``use_token_if_any``
sets that when a token is available (what ``ray.init(address="auto")`` does itself).
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

from ..training import ConfigError

PROBE_SECONDS = 8.0  # the whole probe (name lookup, connect, the gRPC answer)
DEFAULT_PORT = 6379  # ray start --head's default GCS port
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + empty SETTINGS


def split_address(address: str) -> tuple[str, int] | None:
    """'HOST:PORT', 'HOST', '[V6]:PORT' or 'ray://HOST:PORT' -> (host, port); None for the
    addresses Ray resolves itself ('auto', 'local')."""
    text = address.strip()
    if text in ("auto", "local"):
        return None
    text = text.removeprefix("ray://").rstrip("/")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
    else:
        host, _, port = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    if not port:
        return host, DEFAULT_PORT
    if not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ConfigError(f"--address '{address}' is not accepted: give HOST:PORT of the Ray head "
                          f"(e.g. 127.0.0.1:{DEFAULT_PORT})")
    return host, int(port)


def probe(address: str, seconds: float = PROBE_SECONDS) -> None:
    """Raise ConfigError (one line naming `address`) unless a gRPC server answers there."""
    target = split_address(address)
    if target is None:
        return
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(_ask(*target, seconds / 2)), daemon=True)
    worker.start()
    worker.join(seconds)  # name lookups have no timeout of their own: bounded here
    problem = outcome[0] if outcome else f"no answer within {seconds:.0f} s"
    if problem:
        raise ConfigError(f"cannot reach the Ray cluster at --address {address}: {problem} (is a Ray "
                          f"head running there? ray start --head --port={target[1]})")


def _ask(host: str, port: int, seconds: float) -> str:
    """'' when a gRPC server answers at host:port, else what went wrong."""
    try:
        conn = socket.create_connection((host, port), timeout=seconds)
    except TimeoutError:
        return f"no answer within {seconds:.0f} s"
    except OSError as err:
        return err.strerror or type(err).__name__
    with conn:
        if os.environ.get("RAY_USE_TLS", "0") not in ("0", ""):
            return ""  # TLS: the plain-text preface would not be answered
        try:
            conn.sendall(_PREFACE)
            head = conn.recv(9)
        except TimeoutError:
            return f"no answer within {seconds:.0f} s"
        except OSError as err:
            return f"the connection failed ({err.strerror or type(err).__name__})"
    if len(head) == 9 and head[3] == 0x04:  # a SETTINGS frame: an HTTP/2 (gRPC) server
        return ""
    return "something answers there, but not a Ray head (no gRPC)"


def token_available() -> bool:
    """Whether a Ray auth token is at hand: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token."""
    if os.environ.get("RAY_AUTH_TOKEN"):
        return True
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    return Path(path).is_file() if path else (Path.home() / ".ray" / "auth_token").is_file()


def use_token_if_any() -> bool:
    """Send the token when one is available and RAY_AUTH_MODE is not set (a head without
    authentication accepts a client that sends one); True when the token is used."""
    if "RAY_AUTH_MODE" in os.environ:
        return os.environ["RAY_AUTH_MODE"].lower() == "token"
    if not token_available():
        return False
    os.environ["RAY_AUTH_MODE"] = "token"
    try:  # Ray reads its config once: refresh it, as Ray does when it turns token mode on itself
        from ray._raylet import Config

        Config.initialize("")
    except (ImportError, AttributeError):
        pass
    return True


def init_failure(address: str | None, err: BaseException, token: bool) -> ConfigError:
    """ray.init's failure as one line; the authentication hint where it may be the cause."""
    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    if token:
        hint = " (a Ray auth token was sent: is it this head's? ray get-auth-token on the head)"
    else:
        hint = (" (if the head uses token authentication, give its token: RAY_AUTH_TOKEN=... or the "
                "file ~/.ray/auth_token, from ray get-auth-token on the head)")
    return ConfigError(f"cannot reach the Ray cluster at {address or 'a new local cluster'}: {first}{hint}")
