"""An offline S1MB-format benchmark set built from the procedural question families.

The real S1MB data (137 English benchmarks) needs a licence click-through and a
GPU-sized model; the default (CPU) profile instead builds benchmarks with exactly
the upstream formats offline, so the same scoring library, result files, Task Avg
and Borda run end to end on a laptop. Where the questions come from is
``s1mb_data.bench_source``:

- ``transfer`` (default): ``decision_pipeline.bench.transfer``'s bench-only
  generators, whose sentences no training family or pretraining document uses
  (two of them ask for held-out skills), so the set measures transfer, not the
  eval re-scored. Subsets ``contains`` (noul), ``kind`` and ``smallest``
  (choice), ``tally`` (score, soft targets from level 2 on) and the many-option
  ``smallest-many``;
- ``items``: the items' own ``bench`` split (questions of the four training
  families that enter no training, calibration or evaluation step). Subsets
  ``keyword``, ``category``, ``larger``, ``count`` and ``larger-many``.

Either way:

- one *subset* per question family (``datasets/<family>``) and one benchmark per
  (family, task), e.g. ``contains-noul-test-v1`` or ``keyword-noul-test-v1``;
- one many-option choice subset, ``smallest-many`` (from ``smallest``) or
  ``larger-many`` (from ``larger``): every such question extended
  deterministically to ``n_options`` (default 12 > the 8 answer labels) distinct
  numbers, so adapters must compose a chunked readout to answer it;
- definitions (§2) in ``benchmarks/<id>.json``, a category file in
  ``categories/<category>.json`` and the rows (§3.1) as JSONL in
  ``datasets/<subset>/test/data.jsonl`` — the layout ``load_benchmarks``,
  ``load_category``, ``read_rows`` and ``load_cases`` read.

Row mapping (the adapter inverts it): one case per question (``case_id`` = the
question id, ``group_id`` = ``<family>-L<level>``), one ``judgment`` decision
``q`` whose ``instructions_json`` is the question text and whose criteria are the
options in authored order (``description_json`` = option text, ``value`` = the
score value or null). The questions are self-contained, so the input state is
the empty object and ``input_hash`` = sha256 of ``state_json``.

Everything is deterministic: rows are sorted by case id, random draws come from
``make_random(seed, ...)`` keyed by question id, and the dataset revision is a
content hash of the written rows.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_pipeline.bench.s1mb import PRIMARY_METRIC, TASKS, Benchmark, dump_benchmark, parse_category
from decision_pipeline.bench.s1mb.jsonio import dumps_strict
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_random, stable_subset

__all__ = [
    "SPLIT", "STATE_JSON", "MANY_SUBSET", "SMALLEST_MANY", "MANY_SUBSETS", "SyntheticSet", "slug", "benchmark_id",
    "many_question", "larger_many",
    "question_row", "build_synthetic", "write_synthetic", "dataset_revision",
]

SPLIT = "test"
STATE_JSON = "{}"  # synthetic questions carry their whole input in the instructions
DECISION_ID = "q"
MANY_SUBSET = "larger-many"  # the items bench's many-option subset (from `larger`)
SMALLEST_MANY = "smallest-many"  # the transfer bench's (from the held-out `smallest` family)
# source family -> its many-option subset; whichever the questions hold is built
MANY_SUBSETS = {"larger": MANY_SUBSET, "smallest": SMALLEST_MANY}
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(name: str) -> str:
    """A subset name that is a valid S1MB id (``[A-Za-z0-9][A-Za-z0-9._-]*``)."""
    text = _UNSAFE.sub("-", str(name)).strip("-._") or "subset"
    return text


def benchmark_id(subset: str, task: str) -> str:
    """Upstream id pattern ``<subset-slug>-<task>-test-v1``."""
    return f"{subset}-{task}-{SPLIT}-v1"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _is_hard(target: Mapping[str, float]) -> bool:
    return sorted(target.values()) == [0.0] * (len(target) - 1) + [1.0]


def question_row(q: Mapping[str, Any]) -> dict[str, Any]:
    """One pipeline question dict -> one §3.1 dataset row (field order as upstream)."""
    options = q["options"]
    task = q["task"]
    given = q.get("target") or {q["gold"]: 1.0}
    target = {o["id"]: float(given.get(o["id"], 0.0)) for o in options}
    criteria = [{"id": o["id"], "description_json": json.dumps(o["text"], ensure_ascii=False),
                 "value": None if o.get("value") is None else float(o["value"])}
                for o in options]
    decision = {"id": DECISION_ID, "kind": "judgment", "type": task, "system_prompt": "",
                "instructions_json": json.dumps(q["question"], ensure_ascii=False), "criteria": criteria,
                "documents": [], "scoring": None}
    metadata = {"family": q.get("family", ""), "level": int(q.get("level", 0)), "gold": q["gold"]}
    return {
        "case_id": q["id"],
        "group_id": f"{q.get('family', 'external')}-L{int(q.get('level', 0))}",
        "language": "en",
        "split": SPLIT,
        "input_hash": _sha256(STATE_JSON),
        "input": {"state_json": STATE_JSON, "decisions": [decision]},
        "targets": [{"decision_id": DECISION_ID, "kind": "judgment_distribution",
                     "annotation_kind": "hard" if _is_hard(target) else "soft",
                     "ids": list(target), "probabilities": list(target.values()),
                     "metadata_json": json.dumps(metadata, sort_keys=True)}],
    }


def many_question(q: Mapping[str, Any], n_options: int, seed: int, subset: str = MANY_SUBSET) -> dict:
    """Extend a ``larger`` or ``smallest`` question to ``n_options`` distinct numbers (deterministic per id).

    The original numbers are kept, new ones are drawn from 0..max(999, ...)
    without repeats, the list is shuffled and the gold is the largest (``larger``)
    or the smallest (``smallest``). Ids are ``o0..o{n-1}`` in the new authored order.
    """
    rng = make_random(seed, "s1mb", subset, q["id"])
    numbers = [int(o["text"]) for o in q["options"]]
    hi = max(999, n_options * 4, *numbers)
    taken = set(numbers)
    pool = [x for x in range(hi + 1) if x not in taken]
    numbers = numbers + rng.sample(pool, n_options - len(numbers))
    rng.shuffle(numbers)
    word, best = ("smallest", min(numbers)) if subset == SMALLEST_MANY else ("largest", max(numbers))
    gold = f"o{numbers.index(best)}"
    options = [{"id": f"o{i}", "text": str(x), "value": None} for i, x in enumerate(numbers)]
    return {"id": f"{q['id']}-x{n_options}", "family": subset, "level": int(q.get("level", 0)),
            "task": "choice", "question": q["question"], "options": options, "gold": gold,
            "target": {o["id"]: float(o["id"] == gold) for o in options},
            "trace": f"The {word} of {n_options} numbers is {best}."}


def larger_many(q: Mapping[str, Any], n_options: int, seed: int) -> dict:
    """A ``larger`` question extended to ``n_options`` numbers (the ``items`` bench's many-option subset)."""
    return many_question(q, n_options, seed, MANY_SUBSET)


@dataclass
class SyntheticSet:
    """What ``write_synthetic`` writes: definitions, the category and rows per subset."""

    definitions: dict[str, Benchmark]
    category: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]]  # subset -> rows sorted by case_id


def build_synthetic(questions: Iterable[Mapping[str, Any]], *, category: str, seed: int,
                    many_options: int = 12, max_cases: int | None = None, source: str = "items") -> SyntheticSet:
    """Benchmarks per (family, task) from the given questions, plus the many-option subset(s).

    ``source`` names where the questions come from (``items``: the items' bench
    split; ``transfer``: ``bench.transfer``) for the category description alone.
    ``max_cases`` caps each family (the lowest ids by SHA-256 rank are kept, a
    seed-free sample stable across machines). ``many_options`` < 9 skips the
    many-option subsets (they would not need chunking).
    """
    by_family: dict[str, list[dict]] = defaultdict(list)
    for q in questions:
        by_family[slug(q.get("family", "external"))].append(dict(q))
    if not by_family:
        raise PipelineError("s1mb_data: no bench questions to build benchmarks from; raise items.splits.bench")
    for reserved in sorted(set(MANY_SUBSETS.values()) & set(by_family)):
        raise PipelineError(f"s1mb_data: family name {reserved!r} is reserved for a many-option subset")
    subsets: dict[str, list[dict]] = {}
    for family in sorted(by_family):
        chosen = by_family[family]
        if max_cases is not None:
            chosen = stable_subset(chosen, max_cases, f"s1mb:{family}")
        subsets[family] = sorted(chosen, key=lambda q: q["id"])
    for family, many in MANY_SUBSETS.items():
        if many_options > 8 and subsets.get(family):
            subsets[many] = [many_question(q, many_options, seed, many) for q in subsets[family]]
    rows = {s: [question_row(q) for q in qs] for s, qs in subsets.items()}
    definitions: dict[str, Benchmark] = {}
    for subset, qs in subsets.items():
        counts = defaultdict(int)
        for q in qs:
            counts[q["task"]] += 1
        for task in TASKS:
            if counts[task]:
                bid = benchmark_id(subset, task)
                definitions[bid] = Benchmark(bid, task, f"datasets/{subset}", SPLIT, counts[task],
                                             counts[task], PRIMARY_METRIC[task])
    cat = {"id": category, "name": f"Synthetic {category}", "description": _DESCRIPTION[source],
           "benchmarks": sorted(definitions)}
    parse_category(cat, definitions)  # validates the id and the references
    return SyntheticSet(definitions, cat, rows)


_DESCRIPTION = {
    "items": "Offline S1MB-format benchmarks built from the pipeline's procedural questions of the "
             "items' bench split, which no training, calibration or evaluation step reads "
             "(decision_pipeline/bench/synthetic.py).",
    "transfer": "Offline S1MB-format benchmarks built from bench-only question generators whose sentences no "
                "training family or pretraining document uses, two of them skills no training family teaches "
                "(decision_pipeline/bench/transfer.py): a transfer test.",
}


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n" for r in rows)


def dataset_revision(synthetic: SyntheticSet) -> str:
    """A 40-hex content hash of the rows (stands in for the HF dataset commit SHA)."""
    h = hashlib.sha1()
    for subset in sorted(synthetic.rows):
        h.update(subset.encode() + b"\x00" + _jsonl(synthetic.rows[subset]).encode("utf-8") + b"\x00")
    return h.hexdigest()


def write_synthetic(root: str | Path, synthetic: SyntheticSet) -> dict[str, str]:
    """Write ``benchmarks/``, ``categories/`` and ``datasets/<subset>/test/data.jsonl`` under ``root``.

    Returns ``{relative path: sha256}`` of every file written (for the index).
    Files are plain writes: wrap ``root`` in ``atomic_dir`` for an atomic output.
    """
    root = Path(root)
    files: dict[str, str] = {}

    def put(rel: str, text: str) -> None:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        files[rel] = _sha256(text)

    for bid, definition in sorted(synthetic.definitions.items()):
        put(f"benchmarks/{bid}.json", dump_benchmark(definition))
    put(f"categories/{synthetic.category['id']}.json", dumps_strict(synthetic.category))
    for subset, rows in sorted(synthetic.rows.items()):
        put(f"datasets/{subset}/{SPLIT}/data.jsonl", _jsonl(rows))
    return files
