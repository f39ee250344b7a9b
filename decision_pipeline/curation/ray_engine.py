"""`curate.engine: ray`: the curate stage over a Ray cluster, the same bytes as `local`.

Why this shape: the per-document steps (decontamination, filters, MinHash signatures, classifier
scores, token counts) are independent per document, so Ray Data runs them streamed over slices
of the pool's Parquet shards with the project's own kernels (ray_kernels.py). What couples
documents is global and small: the compact per-document table (ids, lengths, filter verdicts,
register scores, token counts) comes to the driver; duplicates are grouped across the cluster
(exact keys and LSH bands hash-partitioned by Ray tasks, only groups of >= 2 come back) and
resolved here with the local rule (documents visited by best-register score, the first-visited
member of each cluster kept); the selection runs on the compact table with `selection.select`.
Texts never come to the driver except the few sampled for calibration and the classifier's
background class, which are drawn by pool position exactly as `pipeline.curate` draws them.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_rng
from decision_pipeline.common.log import bars_enabled
from decision_pipeline.common.raycluster import check_capacity, connect
from decision_pipeline.curation import ray_kernels as rk
from decision_pipeline.curation import ray_report
from decision_pipeline.curation.classifier import train_classifier
from decision_pipeline.curation.decontaminate import held_out_questions
from decision_pipeline.curation.filters import build_filters
from decision_pipeline.curation.minhash import check_lsh_params
from decision_pipeline.curation.selection import (calibrate_chars_per_token, check_params, estimate_token_counts,
                                                  random_selection, select)

RETRIES = 3  # the grouping tasks: a killed Ray worker's task is run again (its output depends on its input only)


@dataclass
class Dedup:
    """What dedup removed, as pool positions (`kept` in pool order)."""
    kept: np.ndarray
    removed: np.ndarray       # pool order
    exact: np.ndarray         # pool order, the exact copies among `removed`
    rate: float


class _Background(Sequence):
    """The decontaminated pool as train_classifier sees it: only the texts it samples are read."""

    def __init__(self, reader: rk.RowReader, positions: np.ndarray) -> None:
        self.reader, self.positions = reader, positions

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, i: Any) -> dict:
        return {"text": self.reader.text(int(self.positions[i]))}


def _map(ray: Any, items: list[dict], fn: Any, kwargs: dict, workers: int) -> Any:
    """A Ray Data map over work units, materialized in the object store (not on the driver)."""
    ctx = ray.data.DataContext.get_current()  # importing ray.data configures its loggers: quiet them after
    for handler in logging.getLogger("ray.data").handlers:  # the console only: its session log file keeps all
        if type(handler).__name__ != "SessionFileHandler":
            handler.setLevel(logging.ERROR)  # the stage prints one summary line (or one error line), not Ray's
    ctx.print_on_execution_start = False
    ctx.enable_progress_bars = bars_enabled()
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    # Ray Data reruns a task whose worker died (max_retries -1); a PipelineError inside one is not retried
    return ds.map_batches(fn, batch_size=1, batch_format="numpy", fn_kwargs=kwargs,
                          compute=ray.data.TaskPoolStrategy(size=workers), num_cpus=1).materialize()


def _blocks(ray: Any, ds: Any, columns: list[str]) -> pa.Table:
    """The given columns of every block, pulled one block at a time, in pool order."""
    parts = [ray.get(ref).select(columns) for ref in ds.to_arrow_refs()]
    table = pa.concat_tables(parts)
    return table.take(pc.sort_indices(table, [("pos", "ascending")]))


def _check_unique(ids: pa.ChunkedArray, reader: rk.RowReader) -> None:
    order = pc.sort_indices(ids).to_numpy()
    srt = ids.take(order)
    if len(srt) > 1:
        same = pc.equal(srt.slice(1), srt.slice(0, len(srt) - 1)).to_numpy(zero_copy_only=False)
        if same.any():
            k = int(np.flatnonzero(same)[0])
            a, b = sorted((int(order[k]), int(order[k + 1])))
            raise PipelineError(f"{reader.file_of(b)}: duplicate id '{srt[k].as_py()}' (also in {reader.file_of(a)}); "
                                "ids must be unique across the pool's shards: rename or remove one")


def _unwrap(exc: BaseException) -> BaseException:
    """A PipelineError raised inside a Ray task, or the Ray error itself."""
    seen = exc
    while seen is not None:
        if isinstance(seen, PipelineError):
            return PipelineError(str(seen))
        cause = getattr(seen, "cause", None) or seen.__cause__
        seen = cause if cause is not seen else None
    text = str(exc)
    if "PipelineError: " in text:
        return PipelineError(text.rsplit("PipelineError: ", 1)[1].strip().splitlines()[0])
    return exc


def _groups(ray: Any, ds: Any, bands: int, rows: int, parts: int) -> tuple[list, list]:
    """Exact-copy and LSH-band groups across the cluster (hash-partitioned map/reduce on Ray tasks)."""
    part = ray.remote(rk.partition).options(num_returns=parts, max_retries=RETRIES, num_cpus=1)
    red = ray.remote(rk.reduce_groups).options(max_retries=RETRIES, num_cpus=1)
    mapped = [part.remote(ref, bands, rows, parts) for ref in ds.to_arrow_refs()]
    mapped = [m if isinstance(m, list) else [m] for m in mapped]
    reduced = ray.get([red.remote(*[m[k] for m in mapped]) for k in range(parts)])
    return [r[0] for r in reduced], [r[1] for r in reduced]


def _split(groups: list) -> list[np.ndarray]:
    return [members[offsets[g]:offsets[g + 1]] for members, offsets in groups for g in range(len(offsets) - 1)]


def resolve_dedup(n: int, filt_pos: np.ndarray, priority: np.ndarray, exact_groups: list[np.ndarray],
                  band_groups: list[np.ndarray]) -> Dedup:
    """`minhash.dedup`'s rule on grouped positions: visit by (-priority, pool order); exact copies of
    an earlier-visited document go first; then each LSH cluster keeps its first-visited member."""
    m = len(filt_pos)
    local = np.full(n, -1, np.int64)
    local[filt_pos] = np.arange(m)
    order = np.lexsort((np.arange(m), -priority))
    visit = np.empty(m, np.int64)
    visit[order] = np.arange(m)
    removed = np.zeros(m, bool)
    exact = np.zeros(m, bool)
    for g in exact_groups:
        idx = local[g]
        keep = idx[np.argmin(visit[idx])]
        exact[idx[idx != keep]] = True
    removed |= exact
    parent: dict[int, int] = {}

    def find(i: int) -> int:
        parent.setdefault(i, i)
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for g in band_groups:  # nodes are visit ranks: a cluster's root is its first-visited member
        ranks = [int(visit[i]) for i in local[g] if not exact[i]]
        if len(ranks) < 2:
            continue
        root = find(ranks[0])
        for r in ranks[1:]:
            rr = find(r)
            if rr != root:
                lo, hi = min(root, rr), max(root, rr)
                parent[hi] = lo
                root = lo
    for r in list(parent):
        if find(r) != r:
            removed[order[r]] = True
    return Dedup(filt_pos[~removed], filt_pos[removed], filt_pos[exact], float(removed.sum() / m) if m else 0.0)


def curate_on_ray(name: str, pool: str, dev: list[dict], items: Sequence[dict], tokenizer_path: str, p: Any,
                  seed: int, provenance: dict) -> Any:
    """`pipeline.curate` for a pool of Parquet shards on a Ray cluster; returns the same Curation."""
    from decision_pipeline.lm.bpe import load_tokenizer  # noqa: PLC0415

    rp = p.ray
    build_filters(p.filters)  # bad filters and rule params fail before any work, as in local
    check_params(p.registers, p.mode, p.overfill, p.reserve, p.budget_tokens, p.weights)
    check_lsh_params(p.minhash.num_perm, p.minhash.bands, p.minhash.rows)
    shards = rk.list_shards(pool)
    reader = rk.RowReader(shards)
    n = sum(sum(s.row_groups) for s in shards)
    tok = load_tokenizer(tokenizer_path)
    ray = connect(rp.address, "curate.ray.address")
    check_capacity(ray, rp.workers, 1, "curate.ray.workers", rp.address)
    held_out = held_out_questions(items)
    work = rk.units(shards, rp.batch_docs)
    try:
        screened = _map(ray, work, rk.screen, {"held_out": held_out, "filters": p.filters,
                                               "num_perm": p.minhash.num_perm, "ngram": p.minhash.ngram,
                                               "seed": seed}, rp.workers)
        table = _blocks(ray, screened, ["pos", "id", "n_chars", "contam", "failed"])
        _check_unique(table.column("id"), reader)
        calib = make_rng(seed, "calib").permutation(n)[:p.calib_docs]
        sample = [reader.text(int(i)) for i in calib]
        chars_per_token = calibrate_chars_per_token(
            sample, lambda t: len(tok(t, add_special_tokens=False)["input_ids"]))
        contam = pc.not_equal(table.column("contam"), "").to_numpy(zero_copy_only=False)
        failed = table.column("failed").to_pylist()
        clean_pos = np.flatnonzero(~contam)
        filt = ~contam & np.array([not f for f in failed], dtype=bool)
        clf = train_classifier(dev, _Background(reader, clean_pos), p.registers, p.classifier, seed=seed)
        need = ~contam if name == "random" else filt
        jobs = [{**u, "need": np.packbits(need[u["pos"]:u["pos"] + u["hi"] - u["lo"]]).tobytes().hex()}
                for u in work]
        measured = _map(ray, jobs, rk.measure, {"model": clf, "tokenizer": tokenizer_path}, rp.workers)
        scores = np.full((n, len(p.registers)), np.nan)
        tokens = np.zeros(n, np.int64)
        for ref in measured.to_arrow_refs():
            b = ray.get(ref)
            pos = b.column("pos").to_numpy()
            tokens[pos] = b.column("tokens").to_numpy()
            for r in range(len(p.registers)):
                scores[pos, r] = b.column(f"s{r}").to_numpy()
        exact_g, band_g = _groups(ray, screened, p.minhash.bands, p.minhash.rows, max(1, rp.workers))
    except Exception as exc:  # noqa: BLE001 - a task's PipelineError comes back wrapped by Ray
        err = _unwrap(exc)
        if err is exc:
            raise
        raise err from None
    filt_pos = np.flatnonzero(filt)
    dedup = resolve_dedup(n, filt_pos, scores[filt_pos].max(axis=1) if len(filt_pos) else np.empty(0),
                          _split(exact_g), _split(band_g))
    cand = clean_pos if name == "random" else dedup.kept
    ids = table.column("id").to_pylist()
    n_chars = table.column("n_chars").to_numpy()
    cand_ids = [ids[i] for i in cand]
    cand_index = {d: k for k, d in enumerate(cand_ids)}
    # estimate_token_counts reads only len(text): ranges of each candidate's length stand in for its text
    est = estimate_token_counts([range(int(c)) for c in n_chars[cand]], chars_per_token)
    exact_tokens = tokens[cand]
    depth = exact_tokens if p.depth_count == "exact" else est
    if name == "curated":
        selection = select(cand_ids, scores[cand], depth, p.budget_tokens, p.registers, p.mode, p.overfill,
                           p.reserve, weights=p.weights, exact_tokens=exact_tokens)
    else:
        selection = random_selection(cand_ids, exact_tokens, p.budget_tokens, make_rng(seed, "random_selection"),
                                     p.reserve, scores=scores[cand], registers=p.registers)
    chosen = np.zeros(n, bool)
    chosen[cand[[cand_index[i] for i in selection.ids[:selection.n_budget_docs]]]] = True
    try:
        docs = _map(ray, [{**u, "need": np.packbits(chosen[u["pos"]:u["pos"] + u["hi"] - u["lo"]]).tobytes().hex()}
                          for u in work], rk.fetch, {}, rp.workers)
        chosen_docs = {int(q): json.loads(d) for ref in docs.to_arrow_refs()
                       for q, d in zip(*ray.get(ref).to_pydict().values())}
    except Exception as exc:  # noqa: BLE001
        err = _unwrap(exc)
        if err is exc:
            raise
        raise err from None
    return ray_report.assemble(name, p, ids, n_chars, table.column("contam").to_pylist(), failed, filt_pos, dedup,
                               cand, scores, est, selection, clf, held_out, chars_per_token, provenance, chosen_docs)
