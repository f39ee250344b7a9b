"""A real Ray cluster on 127.0.0.1 for the tests: a head and worker nodes started with `ray start`,
stopped by process id (never `ray stop`, which would end every Ray on the machine).

Loopback only: Ray rewrites 127.0.0.1 to the machine's outward address. The head keeps the loopback
address with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0; `ray start --address` refuses to run under that
variable, so worker nodes run the same `ray start` command with Ray's localhost rewrite switched off
for that one process. Every port then listens on 127.0.0.1 (checked by `listening_hosts`); usage
statistics are off and no dashboard runs, so nothing leaves the machine.

As a user starts one: every node's `ray start` runs in the cluster's own temp dir, not in the
repository (a Ray worker resolves a relative path against that directory, so a stage that hands one
over fails here as it would for a user), and Ray's temp root is moved there with RAY_TMPDIR (Ray's
documented variable) instead of `--temp-dir`, so `ray.address: auto` finds this cluster the way it
finds the one last started on a machine (`driver_env`), without touching /tmp/ray.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
_WORKER_START = ("import sys, ray._private.services as s; s.resolve_ip_for_localhost = lambda h: h; "
                 "from ray.scripts.scripts import main; sys.argv = ['ray'] + sys.argv[1:]; main()")


def serve_dashboard() -> int:
    """An aiohttp server (what answers on Ray's dashboard port, 8265) on a free loopback port, in a daemon
    thread for the rest of the process: the address people mistake for the cluster's."""
    import asyncio

    from aiohttp import web

    box: list[int] = []

    async def serve() -> None:
        app = web.Application()
        app.router.add_get("/", lambda request: web.Response(text="Ray dashboard"))
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        box.append(site._server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    threading.Thread(target=lambda: asyncio.run(serve()), daemon=True).start()
    while not box:
        time.sleep(0.02)
    return box[0]


def loopback_env() -> dict[str, str]:
    """What a driver (a stage, DVC) needs to reach a loopback cluster, without telemetry."""
    return {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


class LocalCluster:
    """`ray start --head` plus `nodes - 1` worker nodes, `cpus` logical CPUs each, in a temp dir of its own."""

    def __init__(self, nodes: int = 2, cpus: int = 1) -> None:
        # short path: Ray's unix sockets live under it (107-byte limit)
        self.root = Path(tempfile.mkdtemp(prefix="rayt", dir="/tmp"))
        self.nodes, self.cpus = nodes, cpus
        self.address = ""

    def driver_env(self) -> dict[str, str]:
        """A driver's environment in which `ray.address: auto` (no RAY_ADDRESS) means this cluster."""
        env = {**loopback_env(), "RAY_TMPDIR": str(self.root)}
        env.pop("RAY_ADDRESS", None)
        return env

    def start(self) -> "LocalCluster":
        subprocess.run([RAY, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", "0",
                        "--include-dashboard=false", "--disable-usage-stats", "--num-cpus", str(self.cpus)],
                       env=self.driver_env(), cwd=self.root, check=True, capture_output=True, timeout=120)
        self.address = (self.root / "ray" / "ray_current_cluster").read_text().strip()
        for _ in range(self.nodes - 1):
            self.add_node()
        return self

    def add_node(self) -> None:
        env = {k: v for k, v in self.driver_env().items() if k != "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"}
        subprocess.run([sys.executable, "-c", _WORKER_START, "start", "--address", self.address, "--num-cpus",
                        str(self.cpus), "--disable-usage-stats"], env=env, cwd=self.root, check=True,
                       capture_output=True, timeout=120)

    def pids(self) -> list[int]:
        """Every process of this cluster: those naming its temp dir, and their descendants."""
        me = {os.getpid()}
        p = os.getppid()
        while p > 1:
            me.add(p)
            p = _ppid(p)
        procs = {}
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    procs[int(d)] = (_ppid(int(d)), cmd)
                except OSError:
                    continue
        mine = {pid for pid, (_, cmd) in procs.items() if str(self.root) in cmd and pid not in me}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _) in procs.items():
                if ppid in mine and pid not in mine and pid not in me:
                    mine.add(pid)
                    grew = True
        return sorted(mine)

    def worker_pids(self) -> list[int]:
        """Ray worker processes (they run tasks and actors), not the raylets, GCS or agents."""
        out = []
        for pid in self.pids():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if cmd.startswith("ray::") and "Agent" not in cmd and not cmd.startswith("ray::_"):
                out.append(pid)
        return out

    def kill_first_worker(self, needles: tuple[bytes, ...], timeout: float = 300.0) -> "WorkerKiller":
        """Start a thread that SIGKILLs the first Ray worker whose command line names one of `needles`
        (Ray titles a busy worker `ray::Class.method` or `ray::task`), once; `join()` gives the pids killed."""
        return WorkerKiller(self, needles, timeout)

    def stop(self) -> None:
        pids = self.pids()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            time.sleep(1.0 if sig == signal.SIGTERM else 0.2)
        for pid in pids:  # reap the ones that are our children (the rest belong to init)
            try:
                os.waitpid(pid, os.WNOHANG)
            except OSError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


class WorkerKiller(threading.Thread):
    """Polls the cluster's workers every 50 ms until one runs the named work, kills it, and stops."""

    def __init__(self, cluster: LocalCluster, needles: tuple[bytes, ...], timeout: float) -> None:
        super().__init__(daemon=True)
        self.cluster, self.needles, self.deadline = cluster, needles, time.time() + timeout
        self.killed: list[int] = []
        self.start()

    def run(self) -> None:
        while time.time() < self.deadline and not self.killed:
            for pid in self.cluster.worker_pids():
                try:
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:  # it ended between the listing and the read
                    continue
                if any(n in cmd for n in self.needles):
                    os.kill(pid, signal.SIGKILL)
                    self.killed.append(pid)
                    return
            time.sleep(0.05)

    def join(self, timeout: float | None = None) -> list[int]:  # type: ignore[override]
        super().join(timeout)
        return self.killed


def _ppid(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def listening_hosts(pids: list[int]) -> set[str]:
    """The local addresses the given processes listen on (from /proc/net/tcp{,6})."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    hosts = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # LISTEN
                hosts.add(_addr(f[1].split(":")[0], width))
    return hosts


def _addr(hexaddr: str, width: int) -> str:
    raw = bytes.fromhex(hexaddr)
    if width == 8:
        return ".".join(str(b) for b in raw[::-1])
    words = [raw[i:i + 4][::-1] for i in range(0, 16, 4)]
    b = b"".join(words)
    if b[:12] == b"\0" * 10 + b"\xff\xff":
        return ".".join(str(x) for x in b[12:])
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2))
