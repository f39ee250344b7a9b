"""Connecting a stage to a Ray cluster: the engine choice, the address param, fast one-line failures,
capacity checks.

Why a module of its own: curation (Ray Data) and generation (Ray actors) both attach to an
existing cluster started with `ray start`; they must fail the same way, before any work and
before any output is touched, when Ray is not installed, nothing listens at the address, or
the cluster is smaller than the worker count asked for. Ray itself retries an unreachable
head for about a minute and then prints a traceback; a TCP probe of the head's port first
turns that into one line naming the param.

The engine is chosen here, once for the four stages that have one (curate, generate, rl_probe,
reflect): `choose` returns the section's local or Ray path. The pool of actors that generate, rl_probe
and reflect run on the cluster is common/raypool.py.

Loopback clusters: Ray rewrites 127.0.0.1 to the machine's outward address unless
`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` is set before `import ray` (then it keeps the loopback
address). A cluster started on 127.0.0.1 only (the tests) is reached that way.
"""
from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import rule

ENGINES = ("local", "ray")
PROBE_SECONDS = 3.0
T = TypeVar("T")
_joins = 0  # successful `connect` calls in this process (stage_main's ray_exit compares before and after)


@dataclass
class RayParams:
    """Where the Ray cluster is (used only when the section's `engine` is ray)."""
    address: str = rule(run_control=True, doc="the Ray head's GCS address host:port (what `ray start --head` "
                                              "prints), or auto: RAY_ADDRESS, else the cluster last started "
                                              "on this machine")


def replica_engine() -> Any:
    """The `engine` field of a section whose chains `workers` model replicas sample (generate, rl_probe)."""
    return rule(run_control=True, choices=ENGINES, default="local",
                doc="local: `workers` processes (or GPUs) of this machine; ray: `workers` model replicas as "
                    "Ray actors on the cluster at ray.address (the same chains.jsonl, byte for byte)")


def ray_cluster(params: type[RayParams]) -> Any:
    """A section's `ray` field: its cluster params, at address auto unless set."""
    return rule(run_control=True, default_factory=lambda: params("auto"), doc="the Ray cluster (engine: ray only)")


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


def _probe(address: str, key: str) -> None:
    """A TCP connect to the head's port: an unreachable head fails in seconds, in one line."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise PipelineError(f"{key}: {address!r} is not host:port; give the address `ray start --head` printed "
                            "(e.g. 10.0.0.5:6379) or auto")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_SECONDS):
            pass
    except OSError as exc:
        raise PipelineError(f"{key}: no Ray cluster answers at {address} ({exc.strerror or exc}); start one "
                            f"(`ray start --head`) or fix {key}") from None


def connect(address: str, key: str) -> Any:
    """Attach this process to the cluster at `address` (idempotent); returns the `ray` module."""
    global _joins
    host = address.rpartition(":")[0].strip("[]")
    if address != "auto" and _is_loopback(host):
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep 127.0.0.1 (module docstring)
    ray = import_ray(key.rsplit(".", 2)[0] + ".engine")
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "") or _latest_cluster(key)
    if ray.is_initialized():
        if ray.get_runtime_context().gcs_address == address:
            _joins += 1
            return ray
        ray.shutdown()  # attached to another cluster (a library caller): this call names where to run
    _probe(address, key)
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, include_dashboard=False,
                 configure_logging=True)
    except (ConnectionError, RuntimeError) as exc:
        raise PipelineError(f"{key}: could not join the Ray cluster at {address} ({one_line(exc, 160)}); check "
                            f"the head is up (`ray status --address {address}`) or fix {key}") from None
    _joins += 1
    return ray


def _latest_cluster(key: str) -> str:
    """`auto` without RAY_ADDRESS: the cluster `ray start` last recorded on this machine."""
    from ray._private.utils import get_ray_temp_dir  # noqa: PLC0415 - where `ray start` records it

    path = os.path.join(get_ray_temp_dir(), "ray_current_cluster")
    try:
        with open(path, encoding="utf-8") as fh:
            found = fh.read().strip()
    except OSError:
        found = ""
    if not found:
        raise PipelineError(f"{key} is auto but no Ray cluster was started on this machine and RAY_ADDRESS is "
                            f"unset; start one (`ray start --head`) or set {key} to its host:port")
    return found


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
