"""Where the review app listens and which `Host` names it answers to (REVIEW_UI_HOST, REVIEW_UI_PORT,
REVIEW_UI_ALLOWED_HOSTS).

Why: the app refuses a request whose Host it does not serve, so a page that rebinds its own name to
this machine (DNS rebinding) cannot drive a reviewer's signed-in browser. On a loopback bind the names
are the loopback ones. On a network bind (0.0.0.0, or one of the machine's addresses) reviewers reach
it by the machine's own names and addresses, which are found here (hostname, fully qualified name,
every interface address); it used to accept only `Host: 0.0.0.0:PORT`, which no browser sends.
REVIEW_UI_ALLOWED_HOSTS (comma-separated names or addresses; `.example.org` also serves its
subdomains; `*` serves any Host, for an app behind a proxy that checks it) replaces that default.
A port is checked free before anything is written, and a bad variable is one line naming it.
"""
from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import socket
import struct
from collections.abc import Iterable, Mapping
from pathlib import Path

from decision_pipeline.common.errors import PipelineError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
ANY = "*"
_NAME = re.compile(r"\.?[a-z0-9_]([a-z0-9_.-]{0,252})?", re.IGNORECASE)
_SIOCGIFADDR = 0x8915


def port_from_env(env: Mapping[str, str]) -> int:
    """REVIEW_UI_PORT as a port number (default 8765); anything else is one line naming the variable."""
    raw = env.get("REVIEW_UI_PORT", "").strip()
    if not raw:
        return DEFAULT_PORT
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise PipelineError(f"REVIEW_UI_PORT is {raw!r}; give a port number from 1 to 65535 (default {DEFAULT_PORT})")
    return int(raw)


def host_from_env(env: Mapping[str, str]) -> str:
    """REVIEW_UI_HOST (default 127.0.0.1): an address or a host name of this machine."""
    host = env.get("REVIEW_UI_HOST", "").strip().strip("[]") or DEFAULT_HOST
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        if _NAME.fullmatch(host) and not host.startswith("."):
            return host
    raise PipelineError(f"REVIEW_UI_HOST is {host!r}; give the address to listen on: 127.0.0.1 (this machine only, "
                        "the default), 0.0.0.0 (every interface) or one of this machine's addresses or names")


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def _interface_addresses() -> set[str]:
    """Every IPv4 address of the machine's interfaces (ioctl) and its IPv6 ones (/proc, Linux), link-local
    IPv6 left out (a browser cannot put its zone in a Host header)."""
    found: set[str] = set()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()[:15]))
                found.add(socket.inet_ntoa(packed[20:24]))
            except OSError:
                continue  # an interface without an IPv4 address
    inet6 = Path("/proc/net/if_inet6")
    if inet6.is_file():
        for line in inet6.read_text().splitlines():
            addr = ipaddress.ip_address(int(line.split()[0], 16).to_bytes(16, "big"))
            if not addr.is_link_local:
                found.add(str(addr))
    return found


def machine_names() -> set[str]:
    """This machine's host names and addresses (loopback ones included): what a reviewer may type."""
    names = {*LOOPBACK_NAMES, socket.gethostname(), socket.getfqdn()} - {""}
    for name in list(names):
        try:
            names.update(info[4][0] for info in socket.getaddrinfo(name, None) if "%" not in info[4][0])
        except OSError:
            continue
    return {n.lower() for n in names | _interface_addresses()}


def _entry(raw: str) -> str:
    """One allowed-hosts entry as a bare lower-case name or address (a `:port` is dropped: any port)."""
    text, port = raw.strip().lower(), ""
    if text.startswith("["):
        text, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else rest or ""
    elif text.count(":") == 1:
        text, port = text.split(":", 1)
    text = text.rstrip(".") if port.isdigit() or not port else "/"  # a port that is no number: not a host
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    if text != ANY and not _NAME.fullmatch(text):
        raise PipelineError(f"REVIEW_UI_ALLOWED_HOSTS: {raw.strip()!r} is not a host name or address; list the names "
                            "reviewers type, comma-separated (e.g. review.lab.example,10.0.0.5), or * for any")
    return text


def allowed_hosts(host: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """The Host names served: REVIEW_UI_ALLOWED_HOSTS when set, else the loopback names (loopback bind) or
    the machine's names and addresses (network bind)."""
    raw = env.get("REVIEW_UI_ALLOWED_HOSTS", "")
    if raw.strip():
        entries = [e for e in re.split(r"[,\s]+", raw) if e.strip()]
        return tuple(sorted({_entry(e) for e in entries}))
    names = set(LOOPBACK_NAMES) if is_loopback(host) else machine_names()
    names.add(_entry(host))
    return tuple(sorted(names - {"0.0.0.0", "::"}))


def host_of(header: str | None) -> str | None:
    """The name or address of a Host header (`[::1]:8765` -> `::1`), lower case; None when malformed."""
    if not header:
        return None
    try:
        return _entry(header)
    except PipelineError:
        return None


def host_allowed(header: str | None, allowed: Iterable[str]) -> bool:
    """Whether a request's Host header names a host this app serves (ports are not compared)."""
    name = host_of(header)
    if name is None:
        return False
    for entry in allowed:
        entry = _entry(entry)
        if entry == ANY or entry == name or entry.startswith(".") and name.endswith(entry):
            return True
    return False


def check_free(host: str, port: int) -> None:
    """Bind the address once, as the server will: a port in use or an address not on this machine is one line
    before the store is touched."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            if os.name == "posix":
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as waitress binds
            s.bind((host, port))
    except OSError as exc:
        raise bind_error(host, port, exc) from None


def bind_error(host: str, port: int, exc: OSError) -> PipelineError:
    reason = exc.strerror or str(exc)
    if getattr(exc, "errno", None) in (98, 48):  # EADDRINUSE (Linux, macOS)
        return PipelineError(f"REVIEW_UI_PORT {port} on {host} is in use ({reason}); stop the other server or set "
                             "REVIEW_UI_PORT to a free port")
    return PipelineError(f"REVIEW_UI_HOST {host}:{port} cannot be listened on ({reason}); use 127.0.0.1, 0.0.0.0 or "
                         "one of this machine's addresses (and a port >= 1024 unless you run as root)")
