"""Synthetic multi-register document pool, held-out dev target, and external-pool loading.

The generator stands in for a web crawl: four target registers with distinct length
profiles and vocabularies (news, encyclopedic, qa, forum), optional caller-supplied
registers (e.g. ``reasoning``), web junk that the hygiene filters and MinHash must remove
(navigation pages, spam, keyword stuffing, broken encodings, symbol junk, stubs,
near-duplicates) and off-register pages (shop listings, affiliate listicles) that only the
register classifier can tell from the target (``NOISE_KINDS``; shares in docs/curation.md).
All randomness flows from an explicit ``np.random.Generator`` so a seed reproduces the pool
byte for byte. ``meta_*`` fields are generator-only ground truth for
tests and reports; selection code never reads them.
"""
from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_rng
from decision_pipeline.common.io import iter_jsonl, shard_files
from decision_pipeline.common.params import rule
from decision_pipeline.curation import _lexicon as lx
from decision_pipeline.curation.artifacts import artifact_shares, source_register
from decision_pipeline.questions.families import reasoning_text
from decision_pipeline.curation._grammar import (CLEAN_GENERATORS, OFF_REGISTER_GENERATORS, OFF_REGISTERS, REGISTERS,
                                                Draw, near_dup_text, noise_text)
from decision_pipeline.curation.heldout import drop_near_duplicates, split_external, split_tune
from decision_pipeline.curation.minhash import MinhashParams

# What a web pool holds besides clean text of the target registers (issue 51.4; docs/curation.md, "The pool"):
# the kinds the hygiene filters target (boilerplate: navigation pages; repeated: spam lines; stuffing: keyword
# stuffing; mojibake: broken encodings; junk: symbol runs; short: stubs), the near-duplicates MinHash
# targets, and off-register pages (shop listings, affiliate listicles) the classifier targets.
NOISE_KINDS: tuple[str, ...] = ("boilerplate", "repeated", "stuffing", "near_dup", "mojibake", "junk", "short",
                                "off_register")
# the mix when a caller names none (tests, library use); the pipeline's is ingest.noise_weights
DEFAULT_NOISE_WEIGHTS: dict[str, float] = {"boilerplate": 0.2, "repeated": 0.1, "stuffing": 0.1, "near_dup": 0.2,
                                           "mojibake": 0.1, "junk": 0.05, "short": 0.1, "off_register": 0.15}
# P(safety_score = 0..5); 0 = benign, 5 = most unsafe. Forum/noise skew higher.
_SAFETY: dict[str, list[float]] = {
    "news": [0.45, 0.3, 0.15, 0.07, 0.02, 0.01],
    "encyclopedic": [0.7, 0.2, 0.07, 0.02, 0.01, 0.0],
    "qa": [0.6, 0.25, 0.1, 0.03, 0.02, 0.0],
    "forum": [0.25, 0.25, 0.2, 0.15, 0.1, 0.05],
    "noise": [0.2, 0.2, 0.2, 0.15, 0.15, 0.1],
    "extra": [0.5, 0.3, 0.1, 0.05, 0.03, 0.02],
}
ExtraRegisters = Mapping[str, Callable[[np.random.Generator], str]]
POOL_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("safety_score", pa.int64()),
                         ("meta_json", pa.string())])
DEV_SCHEMA = pa.schema([("id", pa.string()), ("text", pa.string()), ("register", pa.string())])


@dataclass
class IngestParams:
    """The pool to curate and the held-out dev target (generated, or external files)."""
    n_docs: int = rule(min=1, max=5_000_000, doc="generated pool size (bounded: the pool is built in memory)")
    noise_fraction: float = rule(min=0.0, max=0.99, doc="share of generated pool documents that are not clean text "
                                                        "of a target register (the kinds of noise_weights)")
    noise_weights: dict[str, float] = rule(
        keys=NOISE_KINDS, min=0.0, doc="relative share of each noise kind among those documents (boilerplate, "
        "repeated = spam lines, stuffing = keyword stuffing, near_dup, mojibake = broken encodings, junk = symbol "
        "runs, short = stubs, off_register = well-formed pages of registers the target lacks); a kind left out is 0")
    dev_per_register: int = rule(min=1, doc="generated dev-target documents per register (the classifier's target)")
    heldout_per_register: int = rule(min=1, doc="generated held-out evaluation documents per register (pretrain "
                                                "perplexity), before near-duplicates of target and pool are dropped")
    heldout_fraction: float = rule(min=0.0, max=0.9, doc="share of an external dev file (by id hash) that becomes "
                                                         "the held-out evaluation set; unused when dev is generated")
    dev_registers: list[str] = rule(choices=REGISTERS + ("reasoning",), nonempty=True, doc="registers of the dev target")
    register_weights: dict[str, float] = rule(
        keys=REGISTERS + ("reasoning",), min=0.0, doc="share of clean pool documents per register (a web crawl is not shaped like the target)")
    external_pool: str = rule(external=True, doc="JSONL/Parquet file or directory replacing the generated pool (a dep of the "
                                  "stage); configs/external/none = generate")
    external_dev: str = rule(external=True, doc="JSONL/Parquet dev file with id, text, register (a dep of the stage); "
                                 "configs/external/none = generate")
    tune_fraction: float = rule(min=0.0, max=0.9, doc="share of the held-out documents (by SHA-256 of the id) set "
                                "apart as the tune set: curation knobs are chosen on its perplexity, the rest stays "
                                "the held-out set read for the headline only")
    seed_offset: int = rule(min=0, doc="added to base.seed for the generated documents alone: a noise study "
                            "regenerates the data with it (reporting/review/noise_study.py, source data)")


def _safety(group: str, d: Draw) -> int:
    cum = np.cumsum(_SAFETY.get(group, _SAFETY["extra"]))
    return int(min(np.searchsorted(cum, d.unif() * cum[-1], side="right"), 5))


def _clean_text(register: str, d: Draw, rng: np.random.Generator, extra: ExtraRegisters) -> str:
    if register in CLEAN_GENERATORS:
        return CLEAN_GENERATORS[register](d)
    text = extra[register](rng)
    if not isinstance(text, str) or not text.strip():
        raise PipelineError(f"extra register '{register}': generator returned {type(text).__name__} "
                            "or empty text; make it return a non-empty str")
    return text


def _registers(extra: ExtraRegisters | None) -> list[str]:
    extra = extra or {}
    clash = sorted(set(extra) & set(REGISTERS))
    if clash:
        raise PipelineError(f"extra_registers: '{clash[0]}' is a built-in register; rename it")
    return list(REGISTERS) + list(extra)


def _noise_cdf(noise_weights: Mapping[str, float] | None) -> np.ndarray:
    weights = DEFAULT_NOISE_WEIGHTS if noise_weights is None else noise_weights
    unknown = sorted(set(weights) - set(NOISE_KINDS))
    if unknown:
        raise PipelineError(f"params.yaml: ingest.noise_weights.{unknown[0]}: unknown noise kind; "
                            f"known: {', '.join(NOISE_KINDS)}")
    w = np.array([float(weights.get(k, 0.0)) for k in NOISE_KINDS])
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise PipelineError("params.yaml: ingest.noise_weights: weights must be finite, >= 0 and have a positive sum")
    return np.cumsum(w / w.sum())


def generate_pool(n_docs: int, noise_fraction: float, rng: np.random.Generator,
                  extra_registers: ExtraRegisters | None = None,
                  register_weights: Mapping[str, float] | None = None,
                  noise_weights: Mapping[str, float] | None = None) -> list[dict]:
    """Generate ``n_docs`` pool documents; a ``noise_fraction`` share are noise kinds.

    Clean documents draw their register from ``register_weights`` (default uniform over
    built-in + extra registers); noise documents their kind from ``noise_weights`` (default
    ``DEFAULT_NOISE_WEIGHTS``), off-register ones their register uniformly from ``OFF_REGISTERS``.
    Near-duplicates always copy an EARLIER clean document (``meta_dup_of``), so first-in-pool-order
    dedup keeps the original.
    """
    if n_docs <= 0 or not 0.0 <= noise_fraction < 1.0:
        raise PipelineError(f"generate_pool: need n_docs > 0 and 0 <= noise_fraction < 1, "
                            f"got {n_docs}, {noise_fraction}")
    extra = dict(extra_registers or {})
    regs = _registers(extra)
    w = np.array([float((register_weights or {}).get(r, 1.0)) for r in regs])
    if (w < 0).any() or w.sum() <= 0:
        raise PipelineError("params.yaml: ingest.register_weights: weights must be finite, >= 0 and have a positive sum")
    cum_w = np.cumsum(w / w.sum())
    cum_noise = _noise_cdf(noise_weights)
    dup_vocab = lx.NEWS["N"] + lx.ENCYCLOPEDIC["N"] + lx.QA["N"] + lx.FORUM["N"]
    docs: list[dict] = []
    clean_idx: list[int] = []
    for i in range(n_docs):
        d = Draw(rng)
        kind = "clean"
        if d.unif() < noise_fraction:
            kind = NOISE_KINDS[min(int(np.searchsorted(cum_noise, d.unif(), side="right")), len(NOISE_KINDS) - 1)]
            if kind == "near_dup" and not clean_idx:
                kind = "clean"
        doc: dict = {"id": f"pool-{i:06d}"}
        if kind == "clean":
            reg = regs[min(int(np.searchsorted(cum_w, d.unif(), side="right")), len(regs) - 1)]
            doc["text"] = _clean_text(reg, d, rng, extra)
            clean_idx.append(i)
        elif kind == "near_dup":
            src = docs[clean_idx[int(len(clean_idx) * d.unif())]]
            reg = src["meta_register"]
            doc["text"] = near_dup_text(src["text"], d, dup_vocab)
            doc["meta_dup_of"] = src["id"]
        elif kind == "off_register":
            reg = OFF_REGISTERS[min(int(len(OFF_REGISTERS) * d.unif()), len(OFF_REGISTERS) - 1)]
            doc["text"] = OFF_REGISTER_GENERATORS[reg](d)
        else:
            reg = "noise"
            doc["text"] = noise_text(kind, d)
        group = reg if reg in _SAFETY else "extra"
        doc.update(safety_score=_safety(group, d), meta_register=reg, meta_kind=kind)
        docs.append(doc)
    return docs


def generate_dev(n_per_register: int | Mapping[str, int], registers: Iterable[str],
                 rng: np.random.Generator, extra_registers: ExtraRegisters | None = None,
                 avoid_texts: Iterable[str] = (), prefix: str = "dev") -> list[dict]:
    """Held-out dev target docs ``{id, text, register}`` grouped by register.

    Ids are ``<prefix>-<register>-NNNNN`` (never pool ids) and any text equal to one in
    ``avoid_texts`` (pass the pool's texts) or already in the dev set is redrawn, so dev
    and pool are disjoint by construction. Use a different generator than the pool's.
    """
    extra = dict(extra_registers or {})
    known = _registers(extra)
    seen = set(avoid_texts)
    out: list[dict] = []
    for reg in registers:
        if reg not in known:
            raise PipelineError(f"dev register '{reg}' is unknown; known: {', '.join(known)} "
                                "(extra ones need an extra_registers generator)")
        n = n_per_register if isinstance(n_per_register, int) else int(n_per_register.get(reg, 0))
        for j in range(n):
            for _attempt in range(100):
                text = _clean_text(reg, Draw(rng), rng, extra)
                if text not in seen:
                    break
            else:
                raise PipelineError(f"dev register '{reg}': generator keeps repeating pool/dev "
                                    "texts; make it produce more varied documents")
            seen.add(text)
            out.append({"id": f"{prefix}-{reg}-{j:05d}", "text": text, "register": reg})
    return out


def validate_pool(docs: list[dict], source: str = "pool") -> list[dict]:
    """Reject an empty pool, missing/non-string ids or texts, and duplicate ids."""
    if not docs:
        raise PipelineError(f"{source}: the pool is empty; point it at a non-empty source or raise n_docs")
    seen: set[str] = set()
    for i, doc in enumerate(docs):
        doc_id = doc.get("id") if isinstance(doc, Mapping) else None
        if not isinstance(doc_id, str) or not doc_id:
            raise PipelineError(f"{source}: document #{i} has no string 'id'; give every document a unique id")
        if not isinstance(doc.get("text"), str):
            raise PipelineError(f"{source}: document '{doc_id}' has {type(doc.get('text')).__name__} "
                                "text; every 'text' must be a string")
        if doc_id in seen:
            raise PipelineError(f"{source}: duplicate id '{doc_id}'; ids must be unique")
        seen.add(doc_id)
    return docs


def _read_jsonl(f: Path) -> list[dict]:
    rows = []
    for ln, row in iter_jsonl(f):
        if "id" not in row or "text" not in row:
            raise PipelineError(f"{f}:{ln}: expected an object with 'id' and 'text'; fix that line")
        rows.append(row)
    return rows


def _read_parquet(f: Path) -> list[dict]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(f)
    except Exception as e:  # pyarrow raises several types for corrupt files
        raise PipelineError(f"{f}: unreadable Parquet ({type(e).__name__}); re-export the shard") from None
    missing = [c for c in ("id", "text") if c not in table.column_names]
    if missing:
        raise PipelineError(f"{f}: Parquet shard lacks column '{missing[0]}'; add 'id' and 'text' columns")
    return table.to_pylist()


def load_external_pool(path: str | Path) -> list[dict]:
    """Load a pool from a JSONL/Parquet file or a directory of ``*.jsonl``/``*.parquet`` shards.

    Shards are read in sorted file-name order so the pool order (which decides which
    near-duplicate survives) is reproducible. Integer ids are converted to strings.
    """
    p = Path(path)
    if p.is_dir():
        files = shard_files(p, (".jsonl", ".parquet"))
        if not files:
            raise PipelineError(f"{p}: no *.jsonl or *.parquet shards in this directory; add shards or fix the path")
    elif p.is_file():
        if p.suffix not in (".jsonl", ".parquet"):
            raise PipelineError(f"{p}: unsupported pool file type; use .jsonl or .parquet")
        files = [p]
    else:
        raise PipelineError(f"{p}: external pool path does not exist; fix the path in params")
    docs: list[dict] = []
    for f in files:
        rows = _read_jsonl(f) if f.suffix == ".jsonl" else _read_parquet(f)
        for r in rows:
            if isinstance(r.get("id"), int) and not isinstance(r["id"], bool):
                r["id"] = str(r["id"])
        docs.extend(rows)
    return validate_pool(docs, source=str(p))


def _reasoning(g: np.random.Generator) -> str:
    return reasoning_text(random.Random(int(g.integers(2**62))))


def _pool_row(doc: dict) -> dict:
    meta = {k: v for k, v in doc.items() if k not in ("id", "text", "safety_score")}
    score = doc.get("safety_score", 0)
    return {"id": str(doc["id"]), "text": doc["text"], "safety_score": int(score if score is not None else 0),
            "meta_json": json.dumps(meta, sort_keys=True, default=str)}


def pool_kinds(pool: Sequence[Mapping]) -> dict:
    """Documents and whitespace words per generator kind and their shares of the pool (the composition
    docs/curation.md describes), with ``clean`` and ``off_register`` also split by register. An external
    pool, which records no kind, is one ``unlabelled`` row."""
    docs: Counter = Counter()
    words: Counter = Counter()
    for d in pool:
        kind, n = d.get("meta_kind") or "unlabelled", len(d["text"].split())
        keys = [kind, f"{kind}/{d.get('meta_register')}"] if kind in ("clean", "off_register") else [kind]
        for key in keys:
            docs[key] += 1
            words[key] += n
    n_docs, n_words = max(len(pool), 1), max(sum(len(d["text"].split()) for d in pool), 1)
    row = lambda k: {"docs": docs[k], "words": words[k], "doc_share": round(docs[k] / n_docs, 4),  # noqa: E731
                     "word_share": round(words[k] / n_words, 4)}
    out = {k: row(k) for k in sorted(docs) if "/" not in k}
    for kind in ("clean", "off_register"):
        if kind in out:
            out[kind]["registers"] = {k.split("/", 1)[1]: row(k) for k in sorted(docs) if k.startswith(kind + "/")}
    return out


def ingest(p: IngestParams, seed: int,
           minhash: MinhashParams) -> tuple[list[dict], list[dict], list[dict], list[dict], dict]:
    """Pool rows (POOL_SCHEMA), dev-target, held-out and tune rows (DEV_SCHEMA), and metrics.

    Dev target and held-out set never share a text with the pool; the held-out set also has no
    near-duplicate (`minhash`) among target and pool documents (see `heldout`). The generated
    registers include ``reasoning``: documents in the decision questions' own language.
    """
    extra = {"reasoning": _reasoning}
    if p.external_pool:
        pool = load_external_pool(p.external_pool)
    else:
        pool = generate_pool(p.n_docs, p.noise_fraction, make_rng(seed, "pool"), extra_registers=extra,
                             register_weights=p.register_weights or None, noise_weights=p.noise_weights)
    pool = validate_pool(pool, p.external_pool or "pool")
    if p.external_dev:
        dev = [{"id": str(d["id"]), "text": d["text"], "register": str(d.get("register", ""))}
               for d in load_external_pool(p.external_dev)]
        dev, heldout = split_external(dev, p.heldout_fraction)
    else:
        dev = generate_dev(p.dev_per_register, p.dev_registers, make_rng(seed, "dev"), extra_registers=extra,
                           avoid_texts=[d["text"] for d in pool])
        heldout = generate_dev(p.heldout_per_register, p.dev_registers, make_rng(seed, "heldout"),
                               extra_registers=extra, avoid_texts=[d["text"] for d in pool + dev], prefix="heldout")
    counts = Counter(d["register"] for d in dev)
    empty = [r for r in p.dev_registers if counts.get(r, 0) == 0]
    if empty:
        raise PipelineError(f"ingest: dev register '{empty[0]}' has no documents; add some or drop it from ingest.dev_registers")
    overlap = {d["text"] for d in dev + heldout} & {d["text"] for d in pool}
    if overlap:
        raise PipelineError(f"ingest: {len(overlap)} dev texts also occur in the pool; the dev target must be held out")
    heldout, held_report = drop_near_duplicates(heldout, dev, pool, minhash, seed)
    missing = [r for r in p.dev_registers if r not in held_report["registers"]]
    if missing:
        raise PipelineError(f"ingest: held-out register '{missing[0]}' has no documents left after near-duplicate "
                            "removal; raise ingest.heldout_per_register (or ingest.heldout_fraction)")
    heldout, tune = split_tune(heldout, p.tune_fraction)
    if tune and {d["register"] for d in tune} != {d["register"] for d in heldout}:
        raise PipelineError("ingest: the tune/held-out split left a register on one side only; raise "
                            "ingest.heldout_per_register or change ingest.tune_fraction")
    metrics = {"pool_docs": len(pool), "pool_kinds": pool_kinds(pool),
               "dev_docs": len(dev), "dev_registers": dict(sorted(counts.items())),
               "heldout_docs": len(heldout), "heldout": held_report, "tune_docs": len(tune),
               "pool_words": int(sum(len(d["text"].split()) for d in pool)),
               "safety_scores": {str(k): v for k, v in sorted(Counter(int(d.get("safety_score") or 0) for d in pool).items())},
               # the artifact-token diagnosis (curation.artifacts): pool by generator register, the others by label
               "artifacts": {"pool": artifact_shares((source_register(d), d["text"]) for d in pool),
                             **{name: artifact_shares((d["register"], d["text"]) for d in docs)
                                for name, docs in (("dev", dev), ("heldout", heldout), ("tune", tune))}}}
    rows = lambda docs: [{"id": d["id"], "text": d["text"], "register": d["register"]} for d in docs]  # noqa: E731
    return [_pool_row(d) for d in pool], rows(dev), rows(heldout), rows(tune), metrics
