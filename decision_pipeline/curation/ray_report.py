"""What `curate.engine: ray` counts and writes from the compact per-document table.

Why its own module: `pipeline.curate` builds its score rows and its screening counts from lists of
documents; the Ray engine has arrays of pool positions instead, so it builds the same rows and
counts here, key for key (the tests compare the files of both engines byte for byte). The
selection, provenance and metrics come from the one rule both engines call (outcome.settle).
"""
from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decision_pipeline.curation.outcome import Screening
from decision_pipeline.curation.pipeline import SCORES_ROW_GROUP, SCORES_SCHEMA


def scores_groups(registers: Sequence[str], table: pa.Table, dedup: Any, cand: np.ndarray,
                  cand_scores: np.ndarray) -> Iterator[pa.Table]:
    """SCORES_SCHEMA rows (`pipeline.curate`'s, key for key) one row group at a time: Python strings
    exist for one group's documents only."""
    n = len(table)
    code = np.zeros(n, np.int8)  # 0 kept or filtered (its first failed filter), 1 near, 2 exact, 3 contaminated
    code[dedup.removed] = 1
    code[dedup.exact] = 2
    code[pc.not_equal(table.column("contam"), "").to_numpy(zero_copy_only=False)] = 3
    fixed = {1: "near_duplicate", 2: "exact_duplicate", 3: "contaminated"}
    for lo in range(0, n, SCORES_ROW_GROUP):
        hi = min(n, lo + SCORES_ROW_GROUP)
        failed = table.column("failed").slice(lo, hi - lo).to_pylist()
        reasons = [fixed[c] if c else f.split(",", 1)[0] for c, f in zip(code[lo:hi].tolist(), failed)]
        k = np.searchsorted(cand, np.arange(lo, hi))  # cand is in pool order: a scored document's row
        scored = (k < len(cand)) & (cand[np.minimum(k, len(cand) - 1)] == np.arange(lo, hi)) if len(cand) else \
            np.zeros(hi - lo, bool)
        blobs = [json.dumps({r: round(float(v), 6) for r, v in zip(registers, cand_scores[j])}) if ok else "{}"
                 for j, ok in zip(k.tolist(), scored.tolist())]
        yield pa.table([table.column("id").slice(lo, hi - lo), pa.array(reasons, pa.string()),
                        pa.array(blobs, pa.string())], schema=SCORES_SCHEMA)


def screening(names: list[str], table: pa.Table, n_held_out: int, n_filtered: int, dedup: Any) -> Screening:
    """What came before the selection, from the compact table: filter drop counts (first failed filter,
    and every failed filter) of clean documents, the contaminated documents with the held-out questions
    found in them (counted over distinct values), and what dedup removed."""
    counts, counts_all = dict.fromkeys(names, 0), dict.fromkeys(names, 0)
    contam = table.column("contam")
    dirty = pc.not_equal(contam, "")
    failed = pc.filter(table.column("failed"), pc.invert(dirty))
    for entry in pc.value_counts(failed).to_pylist():
        f, k = entry["values"], entry["counts"]
        if f:
            parts = f.split(",")
            counts[parts[0]] += k
            for part in parts:
                counts_all[part] += k
    found: set = set()
    for c in pc.filter(contam, dirty).to_pylist():
        found.update(json.loads(c))
    return Screening(len(table), n_held_out, int(pc.sum(dirty).as_py() or 0), len(found), n_filtered, counts,
                     counts_all, len(dedup.removed), len(dedup.exact), dedup.rate)
