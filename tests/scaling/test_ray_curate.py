"""`curate.engine: ray` on a real 2-node Ray cluster gives the local engine's bytes; bad input is one line.

The pool (with exact and near-duplicates) is written once as one Parquet file (local) and once as
three shards with small row groups (ray), so documents, duplicates and near-duplicate clusters
cross task, row-group and file boundaries. A Ray worker process is killed while the stage runs and
the stage still writes the same bytes.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from decision_pipeline.common.io import write_table
from decision_pipeline.common.params import from_dict
from decision_pipeline.common.profiles import merged_profile
from decision_pipeline.curation.documents import DEV_SCHEMA, POOL_SCHEMA, REGISTERS, generate_dev, generate_pool
from decision_pipeline.questions.splits import ItemsParams, build_items
from decision_pipeline.questions.schema import QUESTION_SCHEMA
from tests.scaling.ray_local import listening_hosts

pytestmark = pytest.mark.slow  # a real 2-node Ray cluster and stage subprocesses: about a minute in all
ROOT = Path(__file__).resolve().parents[2]
MICRO = merged_profile("micro", ROOT)
OUTPUTS = ("selection.json", "scores.parquet", "classifier.npz")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray_curate")
    rows, _ = build_items(from_dict(ItemsParams, MICRO["items"], "items"), MICRO["base"]["seed"])
    write_table(root / "items.parquet", rows, QUESTION_SCHEMA)
    pool = generate_pool(600, 0.3, np.random.default_rng(7))
    pool += [dict(pool[5], id="copy-a"), dict(pool[300], id="copy-b", text="  " + pool[300]["text"] + " ")]
    names = set(POOL_SCHEMA.names)
    table = pa.Table.from_pylist([{"meta_json": "{}", **{k: v for k, v in d.items() if k in names}} for d in pool],
                                 schema=POOL_SCHEMA)
    pq.write_table(table, root / "pool.parquet")
    shards = root / "shards"
    shards.mkdir()
    for k, (lo, hi) in enumerate([(0, 170), (170, 430), (430, len(pool))]):
        pq.write_table(table.slice(lo, hi - lo), shards / f"part-{k:02d}.parquet", row_group_size=64)
    dev = generate_dev(10, REGISTERS, np.random.default_rng(8), avoid_texts=[d["text"] for d in pool])
    write_table(root / "dev.parquet", [{k: d[k] for k in DEV_SCHEMA.names} for d in dev], DEV_SCHEMA)
    return root


def run_stage(root: Path, tiny_dir: str, curate: dict, tag: str, name: str = "curated",
              pool: str = "pool.parquet") -> tuple[int, str, Path]:
    """The curate stage as DVC runs it (a subprocess), with micro params changed by `curate`."""
    import subprocess
    import sys

    from tests.scaling.ray_local import loopback_env
    data = json.loads(json.dumps(MICRO))
    data["curate"].update({"registers": list(REGISTERS), "budget_tokens": 6000, "reserve": 0.2, **curate})
    params = root / f"params_{tag}.yaml"
    params.write_text(yaml.safe_dump(data))
    out = root / tag
    proc = subprocess.run([sys.executable, "-m", "stages.curate", name, "--params", str(params), "--pool",
                           str(root / pool), "--dev", str(root / "dev.parquet"), "--tokenizer", tiny_dir, "--items",
                           str(root / "items.parquet"), "--out", str(out / "sel"), "--metrics", str(out / "m.json")],
                          cwd=ROOT, env=loopback_env(), capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr, out


def ray_params(cluster, **extra) -> dict:
    return {"engine": "ray", "ray": {"address": cluster.address, "workers": 2, "batch_docs": 40, **extra}}


def same_outputs(a: Path, b: Path) -> None:
    for name in OUTPUTS:
        assert (a / "sel" / name).read_bytes() == (b / "sel" / name).read_bytes(), name
    assert (a / "m.json").read_bytes() == (b / "m.json").read_bytes()
    pa_, pb = (json.loads((d / "sel" / "provenance.json").read_text()) for d in (a, b))
    assert {k: v for k, v in pa_.items() if k != "source"} == {k: v for k, v in pb.items() if k != "source"}


@pytest.fixture(scope="module")
def local_run(files, tiny_dir):
    rc, err, out = run_stage(files, tiny_dir, {"engine": "local"}, "local")
    assert rc == 0, err
    return out


def test_ray_engine_same_bytes_as_local_with_a_worker_killed(files, tiny_dir, ray_cluster, local_run):
    m = json.loads((local_run / "m.json").read_text())
    assert m["dedup"]["exact"] >= 2 and m["dedup"]["near"] > 0  # duplicates really cross shard files
    assert listening_hosts(ray_cluster.pids()) == {"127.0.0.1"}
    killer = ray_cluster.kill_first_worker((b"screen", b"measure", b"MapBatches"), timeout=120)
    rc, err, out = run_stage(files, tiny_dir, ray_params(ray_cluster), "ray", pool="shards")
    killed = killer.join()
    assert rc == 0, err
    assert killed, "no Ray worker was seen running the stage's tasks"
    same_outputs(local_run, out)


def test_ray_engine_random_arm(files, tiny_dir, ray_cluster):
    rc, err, local = run_stage(files, tiny_dir, {"engine": "local"}, "local_random", name="random")
    assert rc == 0, err
    rc, err, out = run_stage(files, tiny_dir, ray_params(ray_cluster), "ray_random", name="random", pool="shards")
    assert rc == 0, err
    same_outputs(local, out)


def _corrupt_shards(root: Path) -> str:
    d = root / "corrupt"
    d.mkdir(exist_ok=True)
    for f in (root / "shards").iterdir():
        (d / f.name).write_bytes(f.read_bytes())
    (d / "part-01.parquet").write_bytes((root / "shards" / "part-01.parquet").read_bytes()[:-200])
    return "corrupt"


def _duplicate_shards(root: Path) -> str:
    d = root / "dups"
    d.mkdir(exist_ok=True)
    t = pq.read_table(root / "shards" / "part-00.parquet")
    pq.write_table(t, d / "a.parquet")
    pq.write_table(t.slice(10, 5), d / "b.parquet")
    return "dups"


@pytest.mark.parametrize("case, words", [
    ("corrupt", "part-01.parquet: unreadable Parquet shard"),
    ("dups", "b.parquet: duplicate id"),
    ("no_cluster", "curate.ray.address: no Ray cluster answers at 127.0.0.1:9"),
    ("too_many", "curate.ray.workers is 64"),
])
def test_ray_engine_bad_input_is_one_line(files, tiny_dir, ray_cluster, case, words, capsys):
    pool, extra = "shards", {}
    if case == "corrupt":
        pool = _corrupt_shards(files)
    elif case == "dups":
        pool = _duplicate_shards(files)
    elif case == "no_cluster":
        extra = {"address": "127.0.0.1:9"}
    elif case == "too_many":
        extra = {"workers": 64}
    from stages.curate import main  # in this process: the cases fail in seconds, a subprocess costs its imports
    data = json.loads(json.dumps(MICRO))
    data["curate"].update({"registers": list(REGISTERS), **ray_params(ray_cluster, **extra)})
    params = files / f"params_bad_{case}.yaml"
    params.write_text(yaml.safe_dump(data))
    out = files / f"bad_{case}"
    capsys.readouterr()
    rc = main(["curated", "--params", str(params), "--pool", str(files / pool), "--dev", str(files / "dev.parquet"),
               "--tokenizer", tiny_dir, "--items", str(files / "items.parquet"), "--out", str(out / "sel"),
               "--metrics", str(out / "m.json")])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and words in lines[0], err
    assert not out.exists()
