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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_rng
from decision_pipeline.common.io import read_table
from decision_pipeline.common.log import bars_enabled
from decision_pipeline.common.raypool import attach, task_errors
from decision_pipeline.curation import ray_kernels as rk
from decision_pipeline.curation import ray_report
from decision_pipeline.curation.classifier import train_classifier
from decision_pipeline.curation.decontaminate import held_out_questions
from decision_pipeline.curation.filters import build_filters
from decision_pipeline.curation.minhash import check_lsh_params, union_roots
from decision_pipeline.curation.outcome import settle
from decision_pipeline.curation.pipeline import Curation
from decision_pipeline.curation.selection import calibrate_chars_per_token, check_params, estimate_from_lengths
from decision_pipeline.questions.schema import load_items

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


def _needing(work: list[dict], mask: np.ndarray) -> list[dict]:
    """Work units carrying which of their documents a kernel must read (`mask` over pool positions, packed)."""
    return [{**u, "need": np.packbits(mask[u["pos"]:u["pos"] + u["hi"] - u["lo"]]).tobytes().hex()} for u in work]


def _blocks(ray: Any, ds: Any, columns: list[str]) -> pa.Table:
    """The given columns of every block, in pool order, without copying them: each block is one
    contiguous slice of positions, so the blocks are ordered by their first position (a `take` in
    pool order would copy the whole table into the driver's memory)."""
    parts = []
    for ref in ds.to_arrow_refs():
        block = ray.get(ref)
        if len(block):
            parts.append((block.column("pos")[0].as_py(), block.select(["pos", *columns])))
        del block
    parts.sort(key=lambda part: part[0])
    # a block holds consecutive positions (a unit's rows in order); the blocks tile 0..n-1 when each starts
    # where the previous ends: checked from their first positions and lengths (reading every position
    # would map another 8 bytes per document into the driver)
    ends = np.cumsum([0] + [len(t) for _, t in parts])
    tiled = [first for first, _ in parts] == ends[:-1].tolist()
    table = pa.concat_tables([t for _, t in parts])
    del parts
    if not tiled:  # blocks split or merged unexpectedly: order by position the slow way
        table = table.take(pc.sort_indices(table, [("pos", "ascending")]))
    return table.select(columns)


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


def _groups(ray: Any, ds: Any, bands: int, rows: int, parts: int) -> tuple[list, list]:
    """Exact-copy and LSH-band groups across the cluster (hash-partitioned map/reduce on Ray tasks)."""
    part = ray.remote(rk.partition).options(num_returns=parts, max_retries=RETRIES, num_cpus=1)
    red = ray.remote(rk.reduce_groups).options(max_retries=RETRIES, num_cpus=1)
    mapped = [part.remote(ref, bands, rows, parts) for ref in ds.to_arrow_refs()]
    mapped = [m if isinstance(m, list) else [m] for m in mapped]
    reduced = ray.get([red.remote(*[m[k] for m in mapped]) for k in range(parts)])
    return [r[0] for r in reduced], [r[1] for r in reduced]


def _split(groups: list) -> Iterator[np.ndarray]:
    """Each group's members, one view at a time (a list of views was one object per group)."""
    return (members[offsets[g]:offsets[g + 1]] for members, offsets in groups for g in range(len(offsets) - 1))


def resolve_dedup(n: int, filt_pos: np.ndarray, priority: np.ndarray, exact_groups: Iterable[np.ndarray],
                  band_groups: Iterable[np.ndarray]) -> Dedup:
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
    # nodes are visit ranks: a cluster's root (its smallest rank) is its first-visited member
    ranks = ([int(visit[i]) for i in local[g] if not exact[i]] for g in band_groups)
    for r, root in union_roots(ranks).items():
        if root != r:
            removed[order[r]] = True
    return Dedup(filt_pos[~removed], filt_pos[removed], filt_pos[exact], float(removed.sum() / m) if m else 0.0)


def curate_on_ray(name: str, pool: str, dev_path: str, items_path: str, tokenizer_path: str, p: Any,
                  seed: int, provenance: dict) -> Curation:
    """`pipeline.curate_files` for a pool of Parquet shards on a Ray cluster (`curate.engine: ray`): the
    same arguments, the same Curation."""
    dev, items = read_table(dev_path), load_items(items_path)
    from decision_pipeline.lm.bpe import load_tokenizer  # noqa: PLC0415

    rp = p.ray
    build_filters(p.filters)  # bad filters and rule params fail before any work, as in local
    check_params(p.registers, p.mode, p.overfill, p.reserve, p.budget_tokens, p.weights)
    check_lsh_params(p.minhash.num_perm, p.minhash.bands, p.minhash.rows)
    shards = rk.list_shards(pool)
    reader = rk.RowReader(shards)
    n = sum(sum(s.row_groups) for s in shards)
    tok = load_tokenizer(tokenizer_path)
    ray, _ = attach(rp.address, "curate.ray.address", rp.workers, "curate.ray.workers", 1)  # tasks of 1 CPU
    held_out = held_out_questions(items)
    work = rk.units(shards, rp.batch_docs)
    with task_errors():  # a task's PipelineError comes back wrapped by Ray: raised as itself
        screened = _map(ray, work, rk.screen, {"held_out": held_out, "filters": p.filters,
                                               "num_perm": p.minhash.num_perm, "ngram": p.minhash.ngram,
                                               "seed": seed}, rp.workers)
        table = _blocks(ray, screened, ["id", "n_chars", "contam", "failed"])
        _check_unique(table.column("id"), reader)
        calib = make_rng(seed, "calib").permutation(n)[:p.calib_docs]
        sample = [reader.text(int(i)) for i in calib]
        chars_per_token = calibrate_chars_per_token(
            sample, lambda t: len(tok(t, add_special_tokens=False)["input_ids"]))
        contam = pc.not_equal(table.column("contam"), "").to_numpy(zero_copy_only=False)
        clean_pos = np.flatnonzero(~contam)
        filt = ~contam & pc.equal(table.column("failed"), "").to_numpy(zero_copy_only=False)
        clf = train_classifier(dev, _Background(reader, clean_pos), p.registers, p.classifier, seed=seed)
        need = ~contam if name == "random" else filt
        measured = _map(ray, _needing(work, need), rk.measure, {"model": clf, "tokenizer": tokenizer_path},
                        rp.workers)
        del contam
        need_pos = np.flatnonzero(need)  # scores and token counts exist for these documents only
        scores = np.full((len(need_pos), len(p.registers)), np.nan)
        tokens = np.zeros(len(need_pos), np.int64)
        for ref in measured.to_arrow_refs():
            b = ray.get(ref)
            if not len(b):
                continue
            k = int(np.searchsorted(need_pos, b.column("pos")[0].as_py()))  # a block: consecutive needed docs
            tail = k + len(b) - 1
            at = slice(k, k + len(b)) if tail < len(need_pos) and need_pos[tail] == b.column("pos")[-1].as_py() \
                else np.searchsorted(need_pos, b.column("pos").to_numpy())
            tokens[at] = b.column("tokens").to_numpy()
            for r in range(len(p.registers)):
                scores[at, r] = b.column(f"s{r}").to_numpy()
            del b
        exact_g, band_g = _groups(ray, screened, p.minhash.bands, p.minhash.rows, max(1, rp.workers))
        del screened, measured  # their blocks leave the object store
    filt_pos = np.flatnonzero(filt)
    del filt, need
    priority = scores[np.searchsorted(need_pos, filt_pos)].max(axis=1) if len(filt_pos) else np.empty(0)
    dedup = resolve_dedup(n, filt_pos, priority, _split(exact_g), _split(band_g))
    n_filtered = len(filt_pos)
    del exact_g, band_g, priority, filt_pos
    cand = clean_pos if name == "random" else dedup.kept
    del clean_pos
    at = np.searchsorted(need_pos, cand)  # candidates are needed documents: their rows in scores/tokens
    cand_scores, exact_tokens = scores[at], tokens[at]  # what the rule and the report read, per candidate
    del scores, tokens, need_pos, at  # the driver's peak is the selection: nothing per pool document beyond it
    cand_ids = table.column("id").take(pa.array(cand))  # Arrow, not a Python string per document
    cand_chars = table.column("n_chars").take(pa.array(cand)).to_numpy()
    est = estimate_from_lengths(cand_chars, chars_per_token)

    counts = ray_report.screening(list(p.filters), table, len(held_out), n_filtered, dedup)

    def budget_docs(index: np.ndarray) -> list[dict]:
        """The budget's documents whole (candidates `index`), fetched from the shards by the cluster."""
        chosen = np.zeros(n, bool)
        chosen[cand[index]] = True
        with task_errors():
            docs = _map(ray, _needing(work, chosen), rk.fetch, {}, rp.workers)
            by_pos = {int(q): json.loads(d) for ref in docs.to_arrow_refs()
                      for q, d in zip(*ray.get(ref).to_pydict().values())}
        return [by_pos[int(cand[k])] for k in index]

    selection, provenance, metrics = settle(name, p, seed, cand_ids, cand_scores, est, exact_tokens, cand_chars,
                                            chars_per_token, counts, clf, provenance, budget_docs)
    return Curation(selection, ray_report.scores_groups(p.registers, table, dedup, cand, cand_scores), clf, provenance,
                    metrics)
