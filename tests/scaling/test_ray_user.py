"""The Ray engine as a user meets it (#53): `dvc repro` with dvc.yaml's relative paths, `ray.address: auto`,
a cluster started from another directory, a wrong port, and `make preflight`.

Why: the other scaling tests pass absolute paths to the stage, and a user's `dvc repro` passes the
relative ones in dvc.yaml; a Ray worker resolves those against the directory its node's `ray start`
ran in. The package's cluster (conftest.py) is started from its own temp dir, with Ray's temp root
moved there by RAY_TMPDIR, so `auto` (no RAY_ADDRESS) finds it the way it finds the cluster last
started on a machine. One throwaway repository (tests/pipeline/repo_copy.py, micro profile) serves
every case; the local engine's outputs are the reference.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.pipeline.repo_copy import copy_repo, run
from tests.scaling.ray_local import serve_dashboard

pytestmark = pytest.mark.slow  # a DVC repository and a real 2-node Ray cluster: a minute or two in all
OUTPUTS = ("data/curate/curated/selection.json", "data/curate/curated/scores.parquet",
           "data/curate/curated/classifier.npz", "data/curate/curated/provenance.json", "metrics/curate/curated.json")
# the stage's command in dvc.yaml (relative paths, run in the repository)
CURATE = ["-m", "stages.curate", "curated", "--pool", "data/pool/pool.parquet", "--dev", "data/pool/dev.parquet",
          "--tokenizer", "models/tokenizer", "--items", "data/items/items.parquet"]


def _set_curate(repo: Path, **curate) -> None:
    params = yaml.safe_load((repo / "params.yaml").read_text())
    for key, value in curate.items():
        if isinstance(value, dict):
            params["curate"][key].update(value)
        else:
            params["curate"][key] = value
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


CURATE_STAGE = "pipelines/curation/dvc.yaml:curate@curated"   # DVC's address of a stage in the curation part


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """A fresh copy with curate@curated (and what it needs) reproduced by the local engine: its bytes."""
    root = copy_repo(tmp_path_factory.mktemp("ray_user") / "repo")
    run(["dvc", "repro", CURATE_STAGE], root)
    return root, {rel: (root / rel).read_bytes() for rel in OUTPUTS}


def _driver_logs(cluster) -> set[str]:
    """The core-driver log of every driver that has joined the cluster (Ray writes one per driver)."""
    return {p.name for p in (cluster.root / "ray").glob("session_*/logs/python-core-driver-*")}


def test_auto_through_dvc_repro_on_a_cluster_started_elsewhere_is_local_byte_for_byte(repo, ray_cluster,
                                                                                      monkeypatch):
    root, local = repo
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(ray_cluster.root))  # Ray's own variable: where `ray start` recorded it
    cwds = {os.readlink(f"/proc/{pid}/cwd") for pid in ray_cluster.pids() if os.path.exists(f"/proc/{pid}/cwd")}
    assert str(ray_cluster.root) in cwds and not any(c.startswith(str(root)) for c in cwds), cwds
    _set_curate(root, engine="ray", ray={"address": "auto", "workers": 2, "batch_docs": 64})
    before = _driver_logs(ray_cluster)
    proc = run(["dvc", "repro", CURATE_STAGE], root)
    assert f"Running stage '{CURATE_STAGE}'" in proc.stdout, proc.stdout[-2000:]
    assert len(_driver_logs(ray_cluster) - before) == 1, "the stage did not join this cluster"
    for rel, data in local.items():
        assert (root / rel).read_bytes() == data, rel


def test_the_dashboard_port_as_ray_address_is_one_line_within_the_timeout(repo, tmp_path):
    """The stage as dvc.yaml runs it, `ray.address` at a dashboard: exit 2, one line naming the key and what
    answered, well inside `connect_timeout_s`, nothing written."""
    root, _ = repo
    port = serve_dashboard()
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["curate"].update(engine="ray")
    params["curate"]["ray"].update(address=f"127.0.0.1:{port}", connect_timeout_s=20)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = tmp_path / "out"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, *CURATE, "--params", str(tmp_path / "params.yaml"), "--out", str(out / "sel"),
                           "--metrics", str(out / "m.json")], cwd=root, capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith(f"error: curate.ray.address: 127.0.0.1:{port} is not a Ray head: an HTTP server "
                               "answered 'HTTP/1.0 400 Bad Request'"), lines
    assert took < 20, took
    assert not out.exists()


def test_preflight_joins_each_ray_section_and_names_a_wrong_one(repo, ray_cluster):
    """`make preflight` on a Ray profile: the live cluster passes, a worker count it cannot hold and the
    dashboard's port are each the stage's own line."""
    from decision_pipeline.preflight.checks import check_ray

    root, _ = repo
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["curate"].update(engine="ray")
    params["curate"]["ray"].update(address=ray_cluster.address, workers=2)
    params["reflect"].update(engine="ray")
    params["reflect"]["ray"].update(address=ray_cluster.address, workers=2, cpus_per_worker=1)
    assert check_ray(params) == []
    params["reflect"]["ray"]["workers"] = 3
    port = serve_dashboard()
    params["curate"]["ray"]["address"] = f"127.0.0.1:{port}"
    lines = check_ray(params)
    assert len(lines) == 2 and lines[0].startswith(f"curate.ray.address: 127.0.0.1:{port} is not a Ray head"), lines
    assert lines[1] == (f"reflect.ray.workers is 3 (x 1 CPU each) but the Ray cluster at {ray_cluster.address} has "
                        "2 CPU(s); lower reflect.ray.workers or add nodes (`ray start --address`)"), lines


def test_preflight_of_a_profile_without_ray_starts_nothing(repo):
    from decision_pipeline.preflight.checks import check_ray

    root, _ = repo
    params = yaml.safe_load((root / "params.yaml").read_text())
    for section in ("curate", "generate", "rl_probe", "reflect"):
        params[section].update(engine="local")
        params[section]["ray"]["address"] = "127.0.0.1:9"  # never dialled: the engine is local
    assert check_ray(params) == []
