"""Connecting a stage to a Ray cluster: the engine choice, the address param, fast one-line failures,
capacity checks.

Why a module of its own: curation (Ray Data) and generation (Ray actors) both attach to an
existing cluster started with `ray start`; they must fail the same way, before any work and
before any output is touched, when Ray is not installed, nothing listens at the address, the
address is another service's, or the cluster is smaller than the worker count asked for. Ray
itself retries an unreachable head for about a minute and then prints a traceback, and it waits
forever on a port where another service answers (the dashboard's 8265 is the common mix-up). So:

- a TCP connect to the head's port, then the HTTP/2 greeting a Ray head (a gRPC server) answers
  with a SETTINGS frame: anything else (an HTTP/1 page, Redis, silence) is one line naming the
  param and what answered, in seconds (`_probe`);
- `ray.init` itself runs bounded by `ray.connect_timeout_s` (`_join`): past it the stage stops with
  one line, and the process is ended by `common/log.stage_main` (the abandoned join cannot be undone);
- `auto` is resolved by Ray's public rules only: `RAY_ADDRESS` when set (then probed like a written
  address), else `ray.init(address="auto")`, which reads the cluster `ray start` last recorded on this
  machine (under `RAY_TMPDIR`, default /tmp) and is bounded the same way.

The engine is chosen here, once for the four stages that have one (curate, generate, rl_probe,
reflect): `choose` returns the section's local or Ray path. The pool of actors that generate, rl_probe
and reflect run on the cluster is common/raypool.py.

Loopback clusters: Ray rewrites 127.0.0.1 to the machine's outward address unless
`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` is set before `import ray` (then it keeps the loopback
address). A cluster started on 127.0.0.1 only (the tests) is reached that way; with `auto` and no
RAY_ADDRESS the address is unknown before `import ray`, so set the variable yourself for such a cluster.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule

ENGINES = ("local", "ray")
PROBE_SECONDS = 3.0
CONNECT_SECONDS = 60.0
T = TypeVar("T")
_joins = 0  # successful `connect` calls in this process (stage_main's ray_exit compares before and after)
_abandoned = False  # a `ray.init` still running in a thread after its timeout (stage_main ends the process)
_resolved: dict[str, str] = {}  # `auto` -> the GCS address it joined (a second `connect` reuses the join)
# the HTTP/2 client preface and an empty SETTINGS frame: a gRPC server (a Ray head) answers with SETTINGS
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 0x04


@dataclass
class RayParams:
    """Where the Ray cluster is (used only when the section's `engine` is ray)."""
    address: str = rule(run_control=True, nonempty=True,
                        doc="the Ray head's GCS address host:port (what `ray start --head` prints; not the "
                            "dashboard's 8265), or auto: RAY_ADDRESS, else the cluster `ray start` last "
                            "recorded on this machine")
    connect_timeout_s: float = rule(run_control=True, gt=0.0, max=3600.0,
                                    doc="seconds the stage waits to join the cluster before it stops with one "
                                        "line naming ray.address (60 is plenty for a cluster that is up)")


def replica_engine() -> Any:
    """The `engine` field of a section whose chains `workers` model replicas sample (generate, rl_probe)."""
    return rule(run_control=True, choices=ENGINES, default="local",
                doc="local: `workers` processes (or GPUs) of this machine; ray: `workers` model replicas as "
                    "Ray actors on the cluster at ray.address (the same chains.jsonl, byte for byte)")


def ray_cluster(params: type[RayParams]) -> Any:
    """A section's `ray` field: its cluster params, at address auto unless set."""
    return rule(run_control=True, default_factory=lambda: params("auto", CONNECT_SECONDS),
                doc="the Ray cluster (engine: ray only)")


def choose(section: Any, local: T, ray: T, check: Callable[[], object] | None = None) -> T:
    """The one reading of a stage section's `engine` (one of ENGINES; the params loader checks it):
    `local`, or `ray` once `check` (if given) has joined the cluster and found room for the work, so a
    bad cluster is one line before anything is written. The two paths take the same arguments."""
    if section.engine != "ray":
        return local
    if check is not None:
        check()
    return ray


def joins() -> int:
    """How many times this process has attached to a cluster (`connect`), the idempotent calls included."""
    return _joins


def abandoned() -> bool:
    """Whether a join timed out while Ray was still trying: the process cannot shut Ray down cleanly."""
    return _abandoned


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An error's text folded onto one line and cut to `limit` characters."""
    return " ".join(str(exc).split())[:limit]


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def import_ray(key: str) -> Any:
    """`import ray`, or one line naming the engine key and how to get Ray."""
    try:
        import ray  # noqa: PLC0415 - optional engine: imported only when a stage asks for it
    except ImportError:
        raise PipelineError(f"{key} is ray but Ray is not installed in this environment; run `make install` "
                            "(ray==2.60.0 is in requirements.lock) or set it to local") from None
    return ray


def _split(address: str, key: str, given: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PipelineError(f"{key}: {given!r} is not host:port; give the address `ray start --head` printed "
                            "(e.g. 10.0.0.5:6379) or auto")
    return host.strip("[]"), int(port)


def _printable(raw: bytes, limit: int = 60) -> str:
    return "".join(chr(b) if 32 <= b < 127 else "." for b in raw.strip()[:limit])


def _answer(data: bytes) -> str:
    """What a non-Ray service sent back, as a few printable words."""
    lines = data.split(b"\n")
    if data.startswith(b"HTTP/"):
        server = next((_printable(line.split(b":", 1)[1], 40) for line in lines[1:]
                       if line.lower().startswith(b"server:")), "")
        return (f"an HTTP server answered {_printable(lines[0])!r}{f' (Server: {server})' if server else ''}: "
                "Ray's dashboard (default port 8265) is not the cluster address")
    if b"<html" in data.lower() or b"<!doctype" in data.lower():
        return "an HTTP server answered with a web page: Ray's dashboard (default port 8265) is not the cluster address"
    return f"a service that is not a Ray head answered {_printable(lines[0])!r}"


def _probe(address: str, key: str, where: str, timeout: float) -> None:
    """A TCP connect to the head's port, then the HTTP/2 greeting every Ray head (gRPC) answers: an
    unreachable head or another service is one line in seconds, before `ray.init` would wait on it."""
    host, port = _split(address, key, address)
    wait = min(PROBE_SECONDS, timeout)
    try:
        sock = socket.create_connection((host, port), timeout=wait)
    except OSError as exc:
        raise PipelineError(f"{key}: no Ray cluster answers at {where} ({exc.strerror or exc}); start one "
                            f"(`ray start --head`) or fix {key}") from None
    data, closed = b"", False
    with sock:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return  # a TLS head answers nothing in clear text: ray.init (bounded) tells
        try:
            sock.sendall(_PREFACE)
            deadline = time.monotonic() + wait
            while (len(data) < 9 or data[3] != _SETTINGS and len(data) < 512) and time.monotonic() < deadline:
                sock.settimeout(max(0.05, deadline - time.monotonic()) if len(data) < 9 else 0.2)
                chunk = sock.recv(4096)  # a non-Ray answer: a little more of it, for the message
                if not chunk:
                    closed = True
                    break
                data += chunk
        except socket.timeout:
            pass  # judged by what arrived
        except OSError:
            closed = True  # reset
    if len(data) >= 9 and data[3] == _SETTINGS:
        return
    what = (_answer(data) if data else "the service there closed the connection without a word" if closed
            else f"the service there sent nothing back in {wait:g} s")
    raise PipelineError(f"{key}: {where} is not a Ray head: {what}; give the GCS address `ray start --head` "
                        f"printed (default port 6379) in {key}")


def _join(ray: Any, address: str, key: str, where: str, timeout: float) -> None:
    """`ray.init(address)` in a thread, waited for at most `timeout` seconds."""
    global _abandoned
    box: dict[str, BaseException] = {}

    def init() -> None:
        worker_log = logging.getLogger("ray._private.worker")
        level = worker_log.level
        worker_log.setLevel(logging.ERROR)  # its "SIGTERM handler not set" notice for a non-main thread
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False, include_dashboard=False,
                     configure_logging=True)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            worker_log.setLevel(level)

    thread = threading.Thread(target=init, name="ray-join", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        _abandoned = True
        raise PipelineError(f"{key}: the Ray cluster at {where} did not let this driver join within {timeout:g} s; "
                            f"check it (`{_status(address)}`), fix {key}, or raise "
                            f"{key.rsplit('.', 1)[0]}.connect_timeout_s")
    if "error" in box:
        exc = box["error"]
        if address == "auto" and isinstance(exc, ConnectionError):
            raise PipelineError(f"{key} is auto but no Ray cluster was started on this machine and RAY_ADDRESS "
                                f"is unset ({one_line(exc, 80)}); start one (`ray start --head`) or set {key} to "
                                "its host:port") from None
        raise PipelineError(f"{key}: could not join the Ray cluster at {where} ({one_line(exc, 160)}); check "
                            f"the head is up (`{_status(address)}`) or fix {key}") from None


def _status(address: str) -> str:
    return "ray status" if address == "auto" else f"ray status --address {address}"


def connect(address: str, key: str, timeout: float = CONNECT_SECONDS) -> Any:
    """Attach this process to the cluster at `address` (idempotent), waiting at most `timeout` seconds;
    returns the `ray` module."""
    global _joins
    given = address.strip()
    if not given:
        raise PipelineError(f"{key} is empty; give the address `ray start --head` printed (e.g. 10.0.0.5:6379) "
                            "or auto")
    target = (os.environ.get("RAY_ADDRESS", "").strip() or "auto") if given == "auto" else given
    where = given if target == given else f"{target} (RAY_ADDRESS, for {key}: auto)"
    if target != "auto":
        host, _ = _split(target, key, target)
        if _is_loopback(host):
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep 127.0.0.1 (module docstring)
    ray = import_ray(key.rsplit(".", 2)[0] + ".engine")
    if ray.is_initialized():
        if ray.get_runtime_context().gcs_address == _resolved.get(target, target):
            _joins += 1
            return ray
        ray.shutdown()  # attached to another cluster (a library caller): this call names where to run
    if target != "auto":
        _probe(target, key, where, timeout)
    else:
        where = "auto (the cluster `ray start` last recorded on this machine)"
    _join(ray, target, key, where, timeout)
    if target == "auto":
        _resolved["auto"] = ray.get_runtime_context().gcs_address
    _joins += 1
    return ray


def cluster_cpus(ray: Any) -> int:
    """Logical CPUs of every live node together."""
    return int(ray.cluster_resources().get("CPU", 0))


def cluster_gpus(ray: Any) -> int:
    return int(ray.cluster_resources().get("GPU", 0))


def check_capacity(ray: Any, workers: int, per_worker_cpus: int, key: str, address: str) -> None:
    """A worker count the cluster cannot run at once would wait forever for resources: refuse it."""
    cpus = cluster_cpus(ray)
    if workers * per_worker_cpus > cpus:
        raise PipelineError(f"{key} is {workers} (x {per_worker_cpus} CPU each) but the Ray cluster at {address} "
                            f"has {cpus} CPU(s); lower {key} or add nodes (`ray start --address`)")


def disconnect(ray: Any) -> None:
    """Detach this driver (the cluster keeps running)."""
    if ray.is_initialized():
        ray.shutdown()
