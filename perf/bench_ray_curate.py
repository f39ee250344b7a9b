"""Curation on Ray past one process's memory: the driver's peak RSS at two pool sizes (100k and 1M
documents by default) and docs/s at 1 and 2 Ray workers against the local engine (at the smaller size),
in one run.

    python perf/bench_ray_curate.py --make-pool data/perf/ray_pool --docs 1000000     # once: make ray-pool
    python perf/bench_ray_curate.py --pool data/perf/ray_pool [--sizes 100000 1000000] [--address HOST:PORT]

Why: `curate.engine: ray` streams the pool's Parquet shards through Ray Data and brings only the
compact per-document table (ids, scores, registers, token counts) to the driver, so the driver's
memory should grow with that table, not with the texts. The bound #38 asks: the driver's peak RSS at
1M documents within 1.5x of its peak at 100k.

Every measurement is the curate stage as DVC runs it (`python -m stages.curate curated ...`, the
default params with the engine and pool changed), in a fresh wrapper process whose only child is the
stage, so `ru_maxrss` of its children is that run's driver peak (the Ray workers are the cluster's
processes, not the driver's). A size is a prefix of the shard list (the first k shard files, linked
into a directory of their own). The local engine runs at the smallest size only (the point of Ray is
the sizes it cannot hold). Without --address a 2-node cluster (1 CPU each) is started on 127.0.0.1 for
the run and stopped by process id. Prints one JSON object; --json writes it too.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from decision_pipeline.curation.documents import POOL_SCHEMA, generate_pool  # noqa: E402

INPUTS = {"--dev": "data/pool/dev.parquet", "--tokenizer": "models/tokenizer", "--items": "data/items/items.parquet"}
_PEAK = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc)")


def make_pool(out: Path, docs: int, shard_docs: int, seed: int = 7) -> None:
    """`docs` generated documents in shards of `shard_docs` (each shard its own generator seed; ids
    prefixed by shard, so they are unique across files). Written shard by shard: memory stays one shard."""
    out.mkdir(parents=True, exist_ok=True)
    names = set(POOL_SCHEMA.names)
    for k, lo in enumerate(range(0, docs, shard_docs)):
        path = out / f"part-{k:04d}.parquet"
        if path.exists():
            continue
        n = min(shard_docs, docs - lo)
        rows = [{"meta_json": "{}", **{f: v for f, v in d.items() if f in names}, "id": f"s{k:04d}-{d['id']}"}
                for d in generate_pool(n, 0.3, np.random.default_rng(seed + k))]
        tmp = path.with_suffix(".tmp")
        pq.write_table(pa.Table.from_pylist(rows, schema=POOL_SCHEMA), tmp, row_group_size=2000)
        tmp.rename(path)
        print(f"[ray_pool] {path.name}: {n} documents ({lo + n}/{docs})", file=sys.stderr, flush=True)


def pool_problem(out: Path, docs: int, shard_docs: int) -> str | None:
    """Why `--make-pool OUT` cannot write a pool there (`make ray-pool RAY_POOL=...`), or None: checked before
    the first shard is written."""
    if docs < 1 or shard_docs < 1:
        return f"--docs {docs} / --shard-docs {shard_docs} (RAY_POOL_DOCS): give whole numbers >= 1"
    if out.exists() and not out.is_dir():
        return (f"{out} (RAY_POOL) is a file, not a shard directory; give a new or existing directory "
                "(default data/perf/ray_pool)")
    if out.is_dir() and any(f.suffix not in (".parquet", ".tmp") or not f.name.startswith("part-")
                            for f in out.iterdir()):  # a .tmp: a shard a killed run left half-written
        return (f"{out} (RAY_POOL) holds files that are not this pool's part-*.parquet shards; give an empty or "
                "new directory")
    parent = next((p for p in [out, *out.parents] if p.exists()), Path("."))
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        return f"{out} (RAY_POOL): cannot create it under {parent}; give a writable directory"
    return None


def prefix_dir(pool: Path, size: int, work: Path) -> tuple[Path, int]:
    """A directory linking the first shards that hold `size` documents; returns it and their count."""
    d = work / f"pool_{size}"
    d.mkdir(parents=True, exist_ok=True)
    total = 0
    for shard in sorted(pool.glob("*.parquet")):
        if total >= size:
            break
        link = d / shard.name
        if not link.exists():
            link.symlink_to(shard.resolve())
        total += pq.ParquetFile(shard).metadata.num_rows
    if total < size:
        raise SystemExit(f"error: {pool}: {total} documents, fewer than --sizes {size}; make a larger pool "
                         "(--make-pool ... --docs N)")
    return d, total


def one_file(shards: Path) -> Path:
    """The shards of `shards` as one Parquet file: what the local engine reads (`--pool FILE`)."""
    out = shards.with_suffix(".parquet")
    if not out.exists():
        tmp = out.with_suffix(".tmp")
        with pq.ParquetWriter(tmp, POOL_SCHEMA) as writer:
            for shard in sorted(shards.glob("*.parquet")):
                writer.write_table(pq.read_table(shard, schema=POOL_SCHEMA))
        tmp.rename(out)
    return out


def run_curate(pool: Path, work: Path, tag: str, curate: dict) -> dict:
    """One curate stage run; wall seconds and the driver's peak RSS (MiB)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["curate"].update(curate)
    pfile = work / f"params_{tag}.yaml"
    pfile.write_text(yaml.safe_dump(params, sort_keys=False))
    out = work / tag
    cmd = [sys.executable, "-m", "stages.curate", "curated", "--params", str(pfile), "--pool", str(pool),
           *[a for k, v in INPUTS.items() for a in (k, str(ROOT / v))], "--out", str(out / "sel"),
           "--metrics", str(out / "metrics.json")]
    started = time.perf_counter()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PIPELINE_QUIET": "1"}  # nothing leaves the machine
    proc = subprocess.run([sys.executable, "-c", _PEAK, *cmd], cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    peak_kib, rc = proc.stdout.split()[-2:]
    if rc != "0":
        raise SystemExit(f"error: curate ({tag}) failed: {proc.stderr.strip().splitlines()[-1:]}")
    return {"wall_s": round(wall, 1), "peak_rss_mib": round(int(peak_kib) / 1024, 1),
            "selection": (out / "sel" / "selection.json").read_bytes()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--make-pool", type=Path, help="write a synthetic pool of --docs documents in shards here")
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--shard-docs", type=int, default=50_000)
    ap.add_argument("--pool", type=Path, help="the shard directory to measure on")
    ap.add_argument("--sizes", type=int, nargs=2, default=[100_000, 1_000_000], metavar=("SMALL", "LARGE"))
    ap.add_argument("--address", default="", help="a running Ray cluster (default: start a local 2-node one)")
    ap.add_argument("--work", type=Path, default=ROOT / "data" / "perf" / "ray_work")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if args.make_pool:
        problem = pool_problem(args.make_pool, args.docs, args.shard_docs)
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 2
        make_pool(args.make_pool, args.docs, args.shard_docs)
        return 0
    if not args.pool or not args.pool.is_dir():
        ap.error("--pool DIR (a shard directory; make one with --make-pool)")
    missing = [v for v in INPUTS.values() if not (ROOT / v).exists()]
    if missing:
        raise SystemExit(f"error: {', '.join(missing)} missing; run `make pull` (or `dvc repro pipelines/curation/dvc.yaml:tokenizer`) first")
    cluster = None
    address = args.address
    if not address:
        from tests.scaling.ray_local import LocalCluster  # the tests' loopback cluster, stopped by process id
        cluster = LocalCluster(nodes=2, cpus=1).start()
        address = cluster.address
    try:
        small, large = sorted(args.sizes)
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "unknown") if Path("/proc/cpuinfo").exists() else "unknown"
        result: dict = {"machine_dependent": True, "date": time.strftime("%Y-%m-%d"),
                        "machine": {"cpu": cpu, "cores": os.cpu_count()}, "sizes": {},
                        "cluster": address if args.address else "local 2-node, 1 CPU each"}
        for size in (small, large):
            pool, n = prefix_dir(args.pool, size, args.work)
            # throughput at the small size (1 and 2 workers, and local); the large size with 2 workers only:
            # what it adds is the driver's memory, and a 1-worker pass there would double the bench's time
            runs = {f"ray_{w}": run_curate(pool, args.work, f"ray{w}_{size}", {"engine": "ray", "ray": {
                "address": address, "connect_timeout_s": 60, "workers": w, "batch_docs": 2000}})
                for w in ((1, 2) if size == small else (2,))}
            if size == small:
                runs["local"] = run_curate(one_file(pool), args.work, f"local_{size}", {"engine": "local"})
                if runs["local"]["selection"] != runs["ray_2"]["selection"]:
                    raise SystemExit(f"error: at {n} documents the ray and local selections differ")
                if runs["ray_1"]["selection"] != runs["ray_2"]["selection"]:
                    raise SystemExit(f"error: at {n} documents 1 and 2 Ray workers select differently")
            result["sizes"][n] = {k: {"wall_s": r["wall_s"], "docs_per_s": round(n / r["wall_s"], 1),
                                      "driver_peak_rss_mib": r["peak_rss_mib"]} for k, r in runs.items()}
        s, l = (result["sizes"][k] for k in sorted(result["sizes"]))
        result["driver_rss_ratio_large_over_small"] = round(l["ray_2"]["driver_peak_rss_mib"]
                                                            / s["ray_2"]["driver_peak_rss_mib"], 3)
        result["ray2_over_ray1_docs_per_s"] = round(s["ray_2"]["docs_per_s"] / s["ray_1"]["docs_per_s"], 3)
        result["ray2_over_local_docs_per_s"] = round(s["ray_2"]["docs_per_s"] / s["local"]["docs_per_s"], 3)
        result["docs_per_s_at"] = min(result["sizes"])
    finally:
        if cluster is not None:
            cluster.stop()
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        tmp.rename(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
