"""`reflect.engine: ray` on the real 2-node Ray cluster writes the local engine's reflections, byte for
byte: a rule-based reference generator, and an endpoint candidate whose two actors each serve their own
replica of the tiny model (request seeds count from each chunk's first document, so a chunk of 8 with
batches of 4 falls as in one process). The resume log is gone once the stage is done; a cluster that
cannot hold the actors is one line with nothing written."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from decision_pipeline.common.io import write_table
from decision_pipeline.common.profiles import merged_profile
from tests.scaling.ray_local import loopback_env

pytestmark = pytest.mark.slow  # a real 2-node Ray cluster and stage subprocesses
ROOT = Path(__file__).resolve().parents[2]
POOL_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("safety_score", pa.int64()),
                         ("meta_json", pa.string())])
TEXTS = ["Q: How do I restore the backup archive number {i} after the update broke my settings?",
         "Geneva, May {d} - Minister Keller criticised the refinery plan, calling it premature, on day {i}.",
         "The glacier basin of Norland formed in the late period; surveys counted {i} lakes and ridges."]
CANDIDATES = ("ref_follows_prompt", "served")


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_dir) -> tuple[Path, dict]:
    """A seed table from seed_sample (in process) and params with a reference and a served candidate."""
    root = tmp_path_factory.mktemp("ray_reflect")
    rows = [{"id": f"pool-{i:05d}", "text": TEXTS[i % 3].format(i=i, d=i % 28 + 1), "safety_score": i % 6,
             "meta_json": "{}"} for i in range(240)]
    write_table(root / "pool.parquet", rows, POOL_SCHEMA)
    params = merged_profile("micro", ROOT)
    params["reflect"]["charter"] = str(ROOT / "configs/charter/charter.md")
    params["seed_sample"]["per_score"] = 3  # 18 documents: three chunks, and the served model's runs stay short
    ref = params["reflect"]["candidates"]["ref_follows_prompt"]
    ref["prompt"] = str(ROOT / ref["prompt"])
    params["reflect"]["candidates"] = {"ref_follows_prompt": ref, "served": {
        "kind": "endpoint", "prompt": str(ROOT / "configs/prompts/small_base.md"), "reference": "",
        "serve_model": tiny_dir, "base_url": "", "model": "tiny", "tokenizer": "", "max_tokens": 6,
        "max_prompt_tokens": 200, "temperature": 0.7, "batch_size": 4, "concurrency": 1, "timeout_s": 60.0,
        "max_retries": 1, "gpus": 1}}
    (root / "params.yaml").write_text(yaml.safe_dump(params))
    from stages import seed_sample
    assert seed_sample.main(["--params", str(root / "params.yaml"), "--pool", str(root / "pool.parquet"),
                             "--out", str(root / "seed.parquet"), "--metrics", str(root / "seed.json")]) == 0
    (root / "throughput").mkdir()
    for name in CANDIDATES:  # passed the cost screen
        (root / "throughput" / f"{name}.json").write_text(json.dumps({"affordable": True, "gpu_hours": 1.0}))
    return root, params


def run_reflect(root: Path, params: dict, tag: str, name: str, **reflect) -> tuple[int, str, Path]:
    """The reflect stage as DVC runs it (a subprocess), `reflect` keys changed."""
    data = json.loads(json.dumps(params))
    data["reflect"].update(reflect)
    (root / f"params_{tag}.yaml").write_text(yaml.safe_dump(data))
    out = root / tag
    proc = subprocess.run([sys.executable, "-m", "stages.reflect", name, "--params", str(root / f"params_{tag}.yaml"),
                           "--seed-table", str(root / "seed.parquet"), "--out-dir", str(out / "reflect"),
                           "--metrics-dir", str(out / "metrics"), "--throughput-metrics", str(root / "throughput")],
                          cwd=ROOT, env=loopback_env(), capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stderr, out


@pytest.fixture(scope="module")
def local_run(work):
    """name -> the local engine's output directory (each candidate run once for the module)."""
    root, params = work
    done: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in done:
            rc, err, done[name] = run_reflect(root, params, f"local_{name}", name)
            assert rc == 0, err
        return done[name]
    return get


@pytest.mark.parametrize("name", CANDIDATES)
def test_reflect_on_ray_writes_the_local_reflections(work, ray_cluster, local_run, name):
    root, params = work
    local = local_run(name)
    rc, err, ray_out = run_reflect(root, params, f"ray_{name}", name, engine="ray",
                                   ray={"address": ray_cluster.address, "connect_timeout_s": 60, "workers": 2,
                                        "chunk_docs": 7, "cpus_per_worker": 1})
    assert rc == 0, err
    data = (local / "reflect" / f"{name}.jsonl").read_bytes()
    assert data == (ray_out / "reflect" / f"{name}.jsonl").read_bytes()
    n = len(data.splitlines())
    assert n > 8  # more than one chunk (7, rounded up to 8 for the endpoint's batches of 4)
    assert [p.name for p in (ray_out / "reflect").iterdir()] == [f"{name}.jsonl"]  # no log left behind
    assert ((local / "metrics" / f"{name}.json").read_text() == (ray_out / "metrics" / f"{name}.json").read_text())


def test_reflect_on_a_too_small_cluster_is_one_line_and_writes_nothing(work, ray_cluster):
    root, params = work
    rc, err, out = run_reflect(root, params, "bad", "ref_follows_prompt", engine="ray",
                               ray={"address": ray_cluster.address, "connect_timeout_s": 60, "workers": 64,
                                    "chunk_docs": 8, "cpus_per_worker": 1})
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "reflect.ray.workers is 64" in lines[0], lines
    assert not out.exists()


def test_reflect_on_ray_skips_the_chunks_its_log_holds(work, ray_cluster, local_run):
    """A rerun after a crash: a chunk already in `<out dir>/<candidate>.ray.jsonl` (under the run's key) is
    taken from the log, not reflected again. The planted chunk carries the local texts and a truncation
    count of 5 the generator never produces, so the metrics show where the chunk came from."""
    from decision_pipeline.charter.annotate import ReflectParams, candidate, candidate_prompt
    from decision_pipeline.charter.charter import load_charter
    from decision_pipeline.charter.judge import JudgeParams
    from decision_pipeline.charter.ray_reflect import chunk_size, log_path, run_key
    from decision_pipeline.common.io import read_jsonl, read_table
    from decision_pipeline.common.params import load_section
    root, params = work
    name = "ref_follows_prompt"
    local = local_run(name)
    cfg = load_section(ReflectParams, "reflect", root / "params.yaml")
    c, charter = candidate(cfg, name), load_charter(cfg.charter)
    docs = read_table(root / "seed.parquet")
    key = run_key(name, c, candidate_prompt(name, c, charter), charter,
                  load_section(JudgeParams, "judge", root / "params.yaml").checks, docs, params["base"]["seed"],
                  chunk_size(8, c))
    out = root / "resume_ray" / "reflect"
    out.mkdir(parents=True)
    texts = [r["reflection"] for r in read_jsonl(local / "reflect" / f"{name}.jsonl")][:8]
    log_path(out, name).write_text(json.dumps({"id": "chunk-0", "start": 0, "texts": texts, "truncated": 5}) + "\n")
    log_path(out, name).with_suffix(".key").write_text(key + "\n")
    rc, err, ray_out = run_reflect(root, params, "resume_ray", name, engine="ray",
                                   ray={"address": ray_cluster.address, "connect_timeout_s": 60, "workers": 2,
                                        "chunk_docs": 8, "cpus_per_worker": 1})
    assert rc == 0, err
    assert (ray_out / "reflect" / f"{name}.jsonl").read_bytes() == (local / "reflect" / f"{name}.jsonl").read_bytes()
    m_local, m_ray = (json.loads((d / "metrics" / f"{name}.json").read_text()) for d in (local, ray_out))
    assert (m_local.pop("truncated_prompts"), m_ray.pop("truncated_prompts")) == (0, 5)  # chunk 0 from the log
    assert m_local == m_ray
    assert not log_path(out, name).exists()
