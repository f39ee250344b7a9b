"""`generate.engine: ray` on a real 2-node Ray cluster writes the local engine's chains.jsonl, byte for
byte, with a replica's process killed mid-stage; an unreachable or too small cluster is one line.
`rl_probe.engine: ray` runs on the same replicas and writes the local probe.

Two replicas (one per node, 1 CPU each) share 12 chunks; the killer SIGKILLs the first Ray worker
process seen sampling a chunk (`ray::ChunkSampler.sample`), so Ray restarts the actor and resubmits
the chunk it held. The chunk is sampled again with its own seed and the driver writes only ids it has not
written, so the merged file equals the local one (the log would refuse a duplicate id outright).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from decision_pipeline.common.io import write_table
from decision_pipeline.common.params import from_dict
from decision_pipeline.common.profiles import merged_profile
from decision_pipeline.questions.splits import ItemsParams, build_items
from decision_pipeline.decision.generate.ray_generation import pending_chunks
from decision_pipeline.questions.schema import QUESTION_SCHEMA
from tests.scaling.ray_local import loopback_env

pytestmark = pytest.mark.slow  # a real 2-node Ray cluster and stage subprocesses
ROOT = Path(__file__).resolve().parents[2]
MICRO = merged_profile("micro", ROOT)
SMALL = {"max_questions": 48, "chunk": 4, "max_new_tokens": 16, "threads": 1}


@pytest.fixture(scope="module")
def items(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ray_generate")
    rows, _ = build_items(from_dict(ItemsParams, MICRO["items"], "items"), MICRO["base"]["seed"])
    write_table(root / "items.parquet", rows, QUESTION_SCHEMA)
    return root


def write_params(root: Path, tag: str, **generate) -> Path:
    data = json.loads(json.dumps(MICRO))
    data["generate"].update({**SMALL, **generate})
    path = root / f"params_{tag}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def argv(root: Path, model: str, tag: str, params: Path) -> list[str]:
    out = root / tag
    return ["--params", str(params), "--model", model, "--items", str(root / "items.parquet"), "--out",
            str(out / "gen"), "--metrics", str(out / "m.json"), "--timings", str(out / "t.json")]


def run_stage(root: Path, model: str, tag: str, **generate) -> tuple[int, str, Path]:
    """The generate stage as DVC runs it (a subprocess), with micro params changed by `generate`."""
    proc = subprocess.run([sys.executable, "-m", "stages.generate",
                           *argv(root, model, tag, write_params(root, tag, **generate))],
                          cwd=ROOT, env=loopback_env(), capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr, root / tag


def ray_generate(cluster, **extra) -> dict:
    return {"engine": "ray", "workers": 2, "ray": {"address": cluster.address, "cpus_per_worker": 1, **extra}}


def test_pending_chunks_follow_the_generators_chunking():
    qs = [{"id": f"q{i}"} for i in range(10)]
    done = {f"q{i}:base:{s}" for i in range(4) for s in range(2)} | {"q4:base:0"}
    assert pending_chunks(qs, "base", 2, 4, done) == [1, 2]  # chunk 1 misses q4:base:1, chunk 2 holds q8, q9
    assert pending_chunks(qs, "base", 2, 4, done | {f"q{i}:base:{s}" for i in range(4, 10) for s in range(2)}) == []


def test_ray_engine_same_chains_as_local_with_a_replica_killed(items, tiny_dir, ray_cluster):
    rc, err, local = run_stage(items, tiny_dir, "local", engine="local", workers=1)
    assert rc == 0, err
    killer = ray_cluster.kill_first_worker((b"ChunkSampler.sample",))  # mid-chunk: that chunk must be redone
    rc, err, ray_out = run_stage(items, tiny_dir, "ray", **ray_generate(ray_cluster))
    killed = killer.join()
    assert rc == 0, err
    assert killed, "no Ray worker was seen hosting a replica"
    chains = (local / "gen" / "chains.jsonl").read_bytes()
    assert chains and chains == (ray_out / "gen" / "chains.jsonl").read_bytes()
    assert len(chains.splitlines()) == 48 * 3  # k = 2 sampled chains + the solver's per question
    m_local, m_ray = (json.loads((d / "m.json").read_text()) for d in (local, ray_out))
    assert (m_local.pop("workers"), m_ray.pop("workers")) == (1, 2)  # the metrics record the replica count
    assert m_local == m_ray
    assert not (ray_out / "gen" / "shards").exists()  # the driver's log was merged and dropped


@pytest.mark.parametrize("case, words", [
    ("no_cluster", "generate.ray.address: no Ray cluster answers at 127.0.0.1:9"),
    ("too_many", "generate.workers is 64"),
])
def test_ray_engine_bad_cluster_is_one_line_and_writes_nothing(items, tiny_dir, ray_cluster, case, words, capsys):
    extra = {"address": "127.0.0.1:9"} if case == "no_cluster" else {}
    generate = {**ray_generate(ray_cluster, **extra), **({"workers": 64} if case == "too_many" else {})}
    from stages.generate import main  # in this process: the cases fail in seconds, a subprocess costs its imports
    capsys.readouterr()
    rc = main(argv(items, tiny_dir, f"bad_{case}", write_params(items, f"bad_{case}", **generate)))
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and words in lines[0], lines
    assert not (items / f"bad_{case}").exists()  # no log, no fingerprint, no metrics


def run_probe(root: Path, model: str, tag: str, **probe) -> tuple[int, str, Path]:
    """The rl_probe stage as DVC runs it (a subprocess), micro params with `rl_probe` changed by `probe`."""
    data = json.loads(json.dumps(MICRO))
    data["rl_probe"].update({"threads": 1, **probe})
    params = root / f"params_{tag}.yaml"
    params.write_text(yaml.safe_dump(data))
    out = root / tag
    proc = subprocess.run([sys.executable, "-m", "stages.rl_probe", "--params", str(params), "--model", model,
                           "--items", str(root / "items.parquet"), "--out", str(out / "probe"),
                           "--metrics", str(out / "m.json"), "--timings", str(out / "t.json")],
                          cwd=ROOT, env=loopback_env(), capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr, out


def test_rl_probe_on_ray_writes_the_local_probe(items, tiny_dir, ray_cluster):
    """`rl_probe.engine: ray` reuses generate's replicas: the same chains and probe rows, byte for byte."""
    rc, err, local = run_probe(items, tiny_dir, "probe_local", engine="local", workers=1)
    assert rc == 0, err
    rc, err, ray_out = run_probe(items, tiny_dir, "probe_ray", engine="ray", workers=2,
                                 ray={"address": ray_cluster.address, "cpus_per_worker": 1})
    assert rc == 0, err
    for name in ("chains.jsonl", "probe.jsonl"):
        data = (local / "probe" / name).read_bytes()
        assert data and data == (ray_out / "probe" / name).read_bytes(), name
    rows = (local / "probe" / "probe.jsonl").read_bytes().splitlines()
    assert len((local / "probe" / "chains.jsonl").read_bytes().splitlines()) == 2 * len(rows) > 0  # k = 2
    m_local, m_ray = (json.loads((d / "m.json").read_text()) for d in (local, ray_out))
    assert (m_local.pop("workers"), m_ray.pop("workers")) == (1, 2)
    assert m_local == m_ray


def test_rl_probe_without_a_cluster_is_one_line_and_writes_nothing(items, tiny_dir, capsys):
    from stages.rl_probe import main  # in this process: it fails before loading the model
    data = json.loads(json.dumps(MICRO))
    data["rl_probe"].update({"engine": "ray", "ray": {"address": "127.0.0.1:9", "cpus_per_worker": 1}})
    params = items / "params_probe_bad.yaml"
    params.write_text(yaml.safe_dump(data))
    out = items / "probe_bad"
    capsys.readouterr()
    rc = main(["--params", str(params), "--model", tiny_dir, "--items", str(items / "items.parquet"),
               "--out", str(out / "probe"), "--metrics", str(out / "m.json"), "--timings", str(out / "t.json")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "rl_probe.ray.address: no Ray cluster answers at 127.0.0.1:9" in lines[0], lines
    assert not out.exists()
