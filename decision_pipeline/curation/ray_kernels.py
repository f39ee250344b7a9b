"""The per-document work of `curate.engine: ray`, as functions Ray Data runs on slices of shards.

Why separate from the driver (ray_engine.py): everything here runs inside Ray workers on one
slice of one Parquet shard and calls the project's own kernels (decontaminate, filters, MinHash
signatures, classifier scores, the tokenizer), so each document gets exactly the values the
local engine computes for it; nothing here depends on other documents. Also here: listing and
validating shards, reading a few rows by pool position on the driver, and the band/exact-key
partitioning that groups duplicates across the cluster.

A *unit* is a row slice of one row group of one shard; a document's pool position is its
shard's offset (shards in sorted file-name order, as `documents.load_external_pool`) plus its row.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import shard_files
from decision_pipeline.common.params import rule
from decision_pipeline.common.raycluster import RayParams
from decision_pipeline.curation.classifier import RegisterModel, score_docs
from decision_pipeline.curation.decontaminate import HeldOutQuestion, decontaminate
from decision_pipeline.curation.filters import build_filters
from decision_pipeline.curation.minhash import minhash_signatures

EXACT_BYTES = 16
_TOKENIZERS: dict[str, Any] = {}


@dataclass
class CurateRayParams(RayParams):
    """The Ray cluster and how the pool is cut into Ray tasks (used only when curate.engine is ray)."""
    workers: int = rule(run_control=True, min=1, doc="Ray tasks at once (1 CPU each); at most the cluster's CPUs")
    batch_docs: int = rule(run_control=True, min=1, doc="documents per Ray task (a slice of one Parquet row "
                                                        "group); bounds a task's memory")


@dataclass(frozen=True)
class Shard:
    path: str
    offset: int               # pool position of its first row
    row_groups: tuple[int, ...]  # rows per row group


def list_shards(pool: str | Path) -> list[Shard]:
    """The pool's Parquet shards (a file, or a directory's own *.parquet in name order), footers checked.
    Their paths are absolute: a Ray worker resolves a relative path against the directory its node's
    `ray start` ran in, not the stage's (dvc.yaml passes relative paths)."""
    p = Path(pool)
    if p.is_dir():
        files = [f.resolve() for f in shard_files(p, (".parquet",))]
        if not files:
            raise PipelineError(f"{p}: no *.parquet shards in this directory; add shards or point --pool at them")
    elif p.is_file():
        files = [p.resolve()]
    else:
        raise PipelineError(f"{p}: pool not found; run the ingest stage or fix --pool")
    shards, offset = [], 0
    for f in files:
        try:
            meta = pq.ParquetFile(f).metadata
            names = meta.schema.names
        except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a corrupt file
            raise PipelineError(f"{f}: unreadable Parquet shard ({type(exc).__name__}); re-export it or remove "
                                "it from the shard directory") from None
        missing = [c for c in ("id", "text") if c not in names]
        if missing:
            raise PipelineError(f"{f}: Parquet shard lacks column '{missing[0]}'; every shard needs 'id' and 'text'")
        rgs = tuple(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
        shards.append(Shard(str(f), offset, rgs))
        offset += sum(rgs)
    if offset == 0:
        raise PipelineError(f"{p}: the pool is empty; point it at a non-empty source or raise n_docs")
    return shards


def units(shards: Sequence[Shard], batch_docs: int) -> list[dict]:
    """Work items: at most `batch_docs` rows of one row group each, in pool order."""
    out = []
    for s, shard in enumerate(shards):
        pos = shard.offset
        for rg, n in enumerate(shard.row_groups):
            for lo in range(0, n, batch_docs):
                hi = min(lo + batch_docs, n)
                out.append({"shard": s, "path": shard.path, "rg": rg, "lo": lo, "hi": hi, "pos": pos + lo})
            pos += n
    return out


def read_unit(u: dict) -> tuple[list, list]:
    """(ids, texts) of one unit; a damaged shard, one this node cannot see, or a bad row is one line naming
    the file."""
    if not Path(u["path"]).is_file():
        import socket  # noqa: PLC0415

        raise PipelineError(f"{u['path']}: not found on the Ray node {socket.gethostname()} running this task; "
                            "every node must see the pool at this path (a shared filesystem; docs/scaling.md)")
    try:
        t = pq.ParquetFile(u["path"]).read_row_group(int(u["rg"]), columns=["id", "text"])
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a corrupt page
        raise PipelineError(f"{u['path']}: unreadable Parquet shard ({type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:80]}); re-export it or remove it") from None
    t = t.slice(int(u["lo"]), int(u["hi"]) - int(u["lo"]))
    ids, texts = t.column("id").to_pylist(), t.column("text").to_pylist()
    for k, (i, x) in enumerate(zip(ids, texts)):
        if not isinstance(i, str) or not i:
            raise PipelineError(f"{u['path']}: document #{int(u['lo']) + k} of row group {u['rg']} has no string "
                                "'id'; give every document a unique id")
        if not isinstance(x, str):
            raise PipelineError(f"{u['path']}: document '{i}' has {type(x).__name__} text; every 'text' must be "
                                "a string")
    return ids, texts


class RowReader:
    """Texts by pool position, read on the driver one row group at a time (the few calibration and
    background documents: the local engine draws them by position from the whole pool)."""

    def __init__(self, shards: Sequence[Shard]) -> None:
        self.shards = list(shards)
        self.starts = np.array([s.offset for s in self.shards], dtype=np.int64)
        self._key: tuple[int, int] | None = None
        self._texts: pa.ChunkedArray | None = None
        self._first = 0

    def text(self, pos: int) -> str:
        s = int(np.searchsorted(self.starts, pos, side="right")) - 1
        shard = self.shards[s]
        row, rg = int(pos) - shard.offset, 0
        while row >= shard.row_groups[rg]:
            row -= shard.row_groups[rg]
            rg += 1
        if self._key != (s, rg):
            u = {"path": shard.path, "rg": rg, "lo": 0, "hi": shard.row_groups[rg]}
            self._texts, self._key = read_unit(u)[1], (s, rg)
        return self._texts[row]

    def file_of(self, pos: int) -> str:
        return self.shards[int(np.searchsorted(self.starts, pos, side="right")) - 1].path


def _one(batch: dict) -> dict:
    """A Ray Data batch of size 1 (numpy format) as the unit dict."""
    return {k: (v[0].item() if hasattr(v[0], "item") else v[0]) for k, v in batch.items()}


def screen(batch: dict, held_out: Sequence[HeldOutQuestion], filters: dict, num_perm: int, ngram: int,
           seed: int) -> pa.Table:
    """Pass A, one unit: contamination, filter verdicts, length, exact key and MinHash signature.

    The signature and exact key are written only for documents that are clean and pass every
    filter (the ones dedup sees); the others carry empty bytes.
    """
    u = _one(batch)
    ids, texts = read_unit(u)
    docs = [{"id": i, "text": x} for i, x in zip(ids, texts)]
    clean = decontaminate(docs, held_out)
    named = build_filters(filters)
    failed = ["" if i in clean.removed else ",".join(f.name for f in named if not f.check(x)[0])
              for i, x in zip(ids, texts)]
    keep = [i not in clean.removed and not f for i, f in zip(ids, failed)]
    kept_texts = [x for x, k in zip(texts, keep) if k]
    sig = minhash_signatures(kept_texts, num_perm, ngram, seed, n_threads=1) if kept_texts else \
        np.empty((0, num_perm), np.uint32)
    sig_bytes, exact, j = [], [], 0
    for x, k in zip(texts, keep):
        if k:
            sig_bytes.append(sig[j].tobytes())
            exact.append(hashlib.sha256(" ".join(x.split()).encode("utf-8")).digest()[:EXACT_BYTES])
            j += 1
        else:
            sig_bytes.append(b"")
            exact.append(b"")
    n = len(ids)
    return pa.table({
        "pos": pa.array(np.arange(u["pos"], u["pos"] + n, dtype=np.int64)),
        "shard": pa.array(np.full(n, u["shard"], dtype=np.int32)),
        "id": pa.array(ids, pa.string()),
        "n_chars": pa.array([len(x) for x in texts], pa.int64()),
        "contam": pa.array([json.dumps(clean.removed[i]) if i in clean.removed else "" for i in ids], pa.string()),
        "failed": pa.array(failed, pa.string()),
        "exact": pa.array(exact, pa.binary()),
        "sig": pa.array(sig_bytes, pa.binary()),
    })


def _tokenizer(path: str) -> Any:
    """One tokenizer per worker process (loading one costs more than counting a batch)."""
    if path not in _TOKENIZERS:
        from decision_pipeline.lm.bpe import load_tokenizer  # noqa: PLC0415 - transformers only in workers
        _TOKENIZERS[path] = load_tokenizer(path)
    return _TOKENIZERS[path]


def measure(batch: dict, model: RegisterModel, tokenizer: str) -> pa.Table:
    """Pass B, one unit: register scores and exact token counts of the documents marked in `need`."""
    u = _one(batch)
    need = np.unpackbits(np.frombuffer(bytes.fromhex(u["need"]), dtype=np.uint8),
                         count=int(u["hi"]) - int(u["lo"])).astype(bool)
    ids, texts = read_unit(u)
    pick = [x for x, k in zip(texts, need) if k]
    scores = score_docs(model, pick) if pick else np.empty((0, len(model.registers)))
    counts = _tokenizer(tokenizer)(pick, add_special_tokens=False)["input_ids"] if pick else []
    pos = np.arange(u["pos"], u["pos"] + len(ids), dtype=np.int64)[need]
    cols = {"pos": pa.array(pos), "tokens": pa.array([len(c) for c in counts], pa.int64())}
    for r in range(scores.shape[1]):
        cols[f"s{r}"] = pa.array(scores[:, r], pa.float64())
    return pa.table(cols)


SOURCE_COLUMNS = ("meta_register", "register", "meta_json")  # what artifacts.source_register reads


def fetch(batch: dict) -> pa.Table:
    """Pass C, one unit: the marked documents whole (the budget's, for the artifact diagnosis)."""
    u = _one(batch)
    need = np.unpackbits(np.frombuffer(bytes.fromhex(u["need"]), dtype=np.uint8),
                         count=int(u["hi"]) - int(u["lo"])).astype(bool)
    f = pq.ParquetFile(u["path"])
    cols = ["id", "text", *[c for c in SOURCE_COLUMNS if c in f.schema_arrow.names]]
    t = f.read_row_group(int(u["rg"]), columns=cols).slice(int(u["lo"]), int(u["hi"]) - int(u["lo"]))
    t = t.filter(pa.array(need))
    pos = np.arange(u["pos"], u["pos"] + len(need), dtype=np.int64)[need]
    return pa.table({"pos": pa.array(pos), "doc": pa.array([json.dumps(r) for r in t.to_pylist()], pa.string())})


def _bucket(keys: np.ndarray, salt: np.ndarray, parts: int) -> np.ndarray:
    """A partition per key from its first 8 bytes (MinHash values and SHA-256 digests are uniform)."""
    head = np.frombuffer(keys.tobytes(), dtype=np.uint64)[:: keys.dtype.itemsize // 8] if len(keys) else \
        np.empty(0, np.uint64)
    return ((head ^ salt) % np.uint64(parts)).astype(np.int64)


def partition(block: pa.Table, bands: int, rows: int, parts: int) -> tuple:
    """Map side of the duplicate grouping: (exact keys, band keys) of one block split into `parts`."""
    sig = block.column("sig").to_pylist()
    keep = np.array([len(b) > 0 for b in sig], dtype=bool)
    pos = block.column("pos").to_numpy()[keep]
    exact = np.array([b for b, k in zip(block.column("exact").to_pylist(), keep) if k], dtype=f"V{EXACT_BYTES}")
    width = rows * 4
    raw = np.frombuffer(b"".join(b for b in sig if b), dtype=np.uint8).reshape(len(pos), bands * width) \
        if len(pos) else np.empty((0, bands * width), np.uint8)
    band_id = np.repeat(np.arange(bands, dtype=np.int64)[None, :], len(pos), axis=0).ravel()
    band_key = np.ascontiguousarray(raw.reshape(len(pos) * bands, width)).view(f"V{width}").ravel()
    band_pos = np.repeat(pos, bands)
    e_part = _bucket(exact, np.uint64(0), parts)
    b_part = _bucket(np.ascontiguousarray(np.pad(raw.reshape(-1, width), ((0, 0), (0, (-width) % 8))))
                     .view(f"V{width + (-width) % 8}").ravel(), band_id.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15),
                     parts)
    out = tuple((exact[e_part == k], pos[e_part == k], band_id[b_part == k], band_key[b_part == k],
                 band_pos[b_part == k]) for k in range(parts))
    return out if parts > 1 else out[0]


def _groups(keys: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Members (pos, sorted within a group) of every key shared by >= 2 rows, and group offsets."""
    if len(keys) == 0:
        return np.empty(0, np.int64), np.zeros(1, np.int64)
    _, inv = np.unique(keys, return_inverse=True)
    inv = inv.ravel()
    order = np.lexsort((pos, inv))
    k, p = inv[order], pos[order]
    new = np.ones(len(k), dtype=bool)
    new[1:] = k[1:] != k[:-1]
    starts = np.flatnonzero(new)
    sizes = np.diff(np.append(starts, len(k)))
    multi = sizes >= 2
    members = np.concatenate([p[s:s + n] for s, n in zip(starts[multi], sizes[multi])]) if multi.any() else \
        np.empty(0, np.int64)
    offsets = np.zeros(int(multi.sum()) + 1, np.int64)
    np.cumsum(sizes[multi], out=offsets[1:])
    return members, offsets


def reduce_groups(*pieces: tuple) -> tuple:
    """Reduce side: exact-copy groups and LSH band groups of one partition (compact: duplicates only)."""
    ex = np.concatenate([p[0] for p in pieces]) if pieces else np.empty(0, f"V{EXACT_BYTES}")
    ex_pos = np.concatenate([p[1] for p in pieces]).astype(np.int64)
    b_id = np.concatenate([p[2] for p in pieces])
    b_key = np.concatenate([p[3] for p in pieces])
    b_pos = np.concatenate([p[4] for p in pieces]).astype(np.int64)
    exact = _groups(ex, ex_pos)
    if len(b_key):
        width = b_key.dtype.itemsize
        both = np.empty(len(b_key), dtype=f"V{width + 8}")
        view = both.view(np.uint8).reshape(len(b_key), width + 8)
        view[:, :8] = b_id.astype(">u8").view(np.uint8).reshape(-1, 8)
        view[:, 8:] = b_key.view(np.uint8).reshape(len(b_key), width)
        band = _groups(both, b_pos)
    else:
        band = (np.empty(0, np.int64), np.zeros(1, np.int64))
    return exact, band
