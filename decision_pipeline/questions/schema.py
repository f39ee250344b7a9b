"""One question schema for all three S1MB task types, plus prompt rendering.

A question has ordered options (authored order matters for ties and the
fixed-position baseline), each shown to the model under a letter label; the
gold is an option id and the target a distribution over option ids (hard or
soft). External JSONL/Parquet question files load into the same schema.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pyarrow as pa

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import iter_jsonl, read_table
from decision_pipeline.common.records import Field, Schema, check_record, checked_rows, input_file

TASKS = ("choice", "noul", "score")
LABELS = "ABCDEFGH"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
ANSWER_PREFIX = "Answer:"
# The one statement of the answer format, in the words the model reads. It is what
# `parsing.parse_with_reason` accepts: a thinking block closed by `</think>`, then a line
# `Answer: X`. The readout shares the user turn (its assistant turn opens at `Answer:`,
# skipping the optional thinking block), so readout and post-chain readout see one question.
ANSWER_INSTRUCTION = (f"Think it through inside {THINK_OPEN} and {THINK_CLOSE}, then write the answer on its "
                      f"own line as `{ANSWER_PREFIX} X`, where X is the letter of one option.")

QUESTION_SCHEMA = pa.schema([
    ("id", pa.string()), ("family", pa.string()), ("level", pa.int64()), ("task", pa.string()),
    ("question", pa.string()), ("options_json", pa.string()), ("gold", pa.string()),
    ("target_json", pa.string()), ("trace", pa.string()), ("split", pa.string()),
])


def validate_question(q: dict, where: str) -> dict:
    """Check one question dict; `where` (file:line or id) prefixes the error."""
    for key in ("id", "task", "question", "options", "gold"):
        if key not in q or q[key] in (None, ""):
            raise PipelineError(f"{where}: question is missing '{key}'")
    qid, task, options = q["id"], q["task"], q["options"]
    if task not in TASKS:
        raise PipelineError(f"{where}: question {qid!r} task {task!r} is not one of {', '.join(TASKS)}")
    if not isinstance(options, list) or not 2 <= len(options) <= len(LABELS):
        raise PipelineError(f"{where}: question {qid!r} needs 2..{len(LABELS)} options")
    _check_shape(q, where)
    ids = [str(o.get("id", "")) for o in options]
    if len(set(ids)) != len(ids) or "" in ids:
        raise PipelineError(f"{where}: question {qid!r} option ids must be unique and non-empty")
    if task == "noul" and set(ids) != {"false", "true"}:
        raise PipelineError(f"{where}: noul question {qid!r} needs option ids exactly 'false' and 'true'")
    if task == "score":
        values = [o.get("value") for o in options]
        if any(not isinstance(v, (int, float)) for v in values) or len(set(values)) < 2:
            raise PipelineError(f"{where}: score question {qid!r} needs numeric option values, not all equal")
    if q["gold"] not in ids:
        raise PipelineError(f"{where}: question {qid!r} gold {q['gold']!r} is not one of its option ids {ids}")
    target = q.get("target") or {q["gold"]: 1.0}
    if set(target) != set(ids) and not (len(target) == 1 and q["gold"] in target):
        raise PipelineError(f"{where}: question {qid!r} target keys {sorted(target)} differ from option ids")
    target = {i: float(target.get(i, 0.0)) for i in ids}
    if any(not (0.0 <= p <= 1.0) or math.isnan(p) for p in target.values()) or abs(sum(target.values()) - 1) > 1e-5:
        raise PipelineError(f"{where}: question {qid!r} target must be probabilities in [0,1] summing to 1")
    return {"id": str(qid), "family": str(q.get("family", "external")), "level": int(q.get("level") or 0),
            "task": task, "question": str(q["question"]),
            "options": [{"id": str(o["id"]), "text": str(o.get("text", o["id"])),
                         "value": None if o.get("value") is None else float(o["value"])} for o in options],
            "gold": str(q["gold"]), "target": target, "trace": str(q.get("trace") or "")}


def _check_shape(q: dict, where: str) -> None:
    """Options are objects and the level a whole number: an external file written by hand gets
    `"options": ["a", "b"]` or `"level": "hard"` wrong, and that must name the line, not crash."""
    qid = q["id"]
    bad = next((i for i, o in enumerate(q["options"]) if not isinstance(o, dict)), None)
    if bad is not None:
        raise PipelineError(f"{where}: question {qid!r} option {bad + 1} is {type(q['options'][bad]).__name__}, "
                            'not an object; write each option as {"id": ..., "text": ...}')
    target = q.get("target")
    if target and (not isinstance(target, dict) or
                   any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in target.values())):
        raise PipelineError(f"{where}: question {qid!r} target must map option ids to probabilities (numbers)")
    level = q.get("level") or 0  # absent or null: level 0
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise PipelineError(f"{where}: question {qid!r} level {level!r} is not a whole number >= 0")


def _json_cell(text: object, where: str) -> object:
    """A Parquet cell holding JSON (options_json, target_json); null reads as absent."""
    if text is None:
        return None
    try:
        return json.loads(str(text))
    except json.JSONDecodeError as exc:
        raise PipelineError(f"{where}: a *_json column is not valid JSON ({exc.msg}); re-export the file") from None


EXTERNAL_OPTION = Schema("option", {"id": Field((str, int), required=True, max_chars=200),
                                   "text": Field((str,), max_chars=10_000),
                                   "value": Field((float,), min=-1e12, max=1e12)})
EXTERNAL_QUESTION = Schema("question", {
    "id": Field((str, int), required=True, max_chars=200), "task": Field((str,), required=True),
    "question": Field((str,), required=True), "options": Field((list,), required=True, max_items=len(LABELS),
                                                              items=EXTERNAL_OPTION),
    "gold": Field((str, int), required=True, max_chars=200), "target": Field((dict,)),
    "family": Field((str,), max_chars=100), "level": Field((int,), min=0, max=1000), "trace": Field((str,)),
    "split": Field((str,), max_chars=40)})


def load_external_questions(path: str | Path) -> list[dict]:
    """Load a JSONL or Parquet question file into the schema (errors name file and line)."""
    path = input_file(path, "items.external")
    if path.suffix == ".parquet":
        rows = read_table(path)
        for i, row in enumerate(rows):
            where = f"{path}:row {i + 1}"
            row["options"] = _json_cell(row.pop("options_json"), where) if "options_json" in row else row.get("options")
            if "target_json" in row:
                row["target"] = _json_cell(row.pop("target_json"), where)
        for i, r in enumerate(rows):
            check_record(r, EXTERNAL_QUESTION, f"{path}:row {i + 1}")
        return [validate_question(r, f"{path}:row {i + 1}") for i, r in enumerate(rows)]
    return [validate_question(row, f"{path}:{lineno}")
            for lineno, row in checked_rows(iter_jsonl(path), EXTERNAL_QUESTION, path)]


def to_row(q: dict, split: str) -> dict:
    """Question dict → Parquet row (nested fields as JSON strings)."""
    return {"id": q["id"], "family": q["family"], "level": q["level"], "task": q["task"],
            "question": q["question"], "options_json": json.dumps(q["options"]), "gold": q["gold"],
            "target_json": json.dumps(q["target"], sort_keys=True), "trace": q["trace"], "split": split}


def from_row(row: dict) -> dict:
    q = dict(row)
    q["options"] = json.loads(q.pop("options_json"))
    q["target"] = json.loads(q.pop("target_json"))
    return q


def load_items(path: str | Path, split: str | None = None) -> list[dict]:
    rows = read_table(path, QUESTION_SCHEMA)
    return [from_row(r) for r in rows if split is None or r["split"] == split]


def load_split(path: str | Path, split: str) -> list[dict]:
    """The questions of one split, which must hold some: an empty split would flow on as 0 items
    (a tokenizer without questions, a metric over nothing) instead of failing here."""
    questions = load_items(path, split=split)
    if not questions:
        raise PipelineError(f"{path}: no questions in split '{split}'; raise items.per_cell or "
                            f"items.splits.{split}, or add families/levels")
    return questions


_LIST_TAIL = re.compile(r"^(?P<head>.*?:)\s*(?P<items>[^:]*,[^:]*?)\s*(?P<end>[?.!]?)$")


def list_parts(text: str) -> tuple[str, list[str]] | None:
    """(head, items) of a question ending in a colon-introduced comma list, else None.

    "Is the word cat in this list: dog, cat?" -> ("Is the word cat in this list:", ["dog", "cat"]).
    The items are the part whose order carries no meaning.
    """
    m = _LIST_TAIL.match(text.strip())
    if m is None:
        return None
    return m["head"], [i.strip() for i in m["items"].split(",") if i.strip()]


def normalised_key(q: dict) -> str:
    """Key for duplicate detection: normalised question text and the SET of option texts.

    Options are sorted, and so are the items of a trailing list ("…in this list: a, b, c?"):
    the same question with its options or list items reordered is the same question (a
    model trained on one has seen the other), so it must share a split.
    """
    norm = lambda s: " ".join(s.lower().split())  # noqa: E731
    text = norm(q["question"])
    parts = list_parts(text)
    if parts is not None:
        text = parts[0] + " " + ", ".join(sorted(parts[1]))
    return text + "\x00" + "\x00".join(sorted(norm(o["text"]) for o in q["options"]))


def gold_index(q: dict) -> int:
    return [o["id"] for o in q["options"]].index(q["gold"])


def target_vector(q: dict) -> list[float]:
    """The item's own target over its options in option order: soft where the item is soft
    (count/score questions, external soft labels), one-hot at the gold option otherwise."""
    target = q.get("target")
    if not target:
        return [float(o["id"] == q["gold"]) for o in q["options"]]
    return [float(target.get(o["id"], 0.0)) for o in q["options"]]


def user_message(q: dict) -> str:
    """The question as the user turn: text, lettered options, then `ANSWER_INSTRUCTION` (the
    format the parser needs; a real model is never left to guess it)."""
    lines = [q["question"], ""]
    lines += [f"{LABELS[i]}) {o['text']}" for i, o in enumerate(q["options"])]
    lines += ["", ANSWER_INSTRUCTION]
    return "\n".join(lines)


def assistant_answer(q: dict, label: str, chain: str | None = None) -> str:
    """Assistant turn: an optional thinking block, then `Answer: X`."""
    answer = f"{ANSWER_PREFIX} {label}"
    if chain is None:
        return answer
    return f"{THINK_OPEN}\n{chain.strip()}\n{THINK_CLOSE}\n{answer}"


def label_tokens(n_options: int) -> list[str]:
    """The text of each option's label token as it follows `Answer:`."""
    return [f" {LABELS[i]}" for i in range(n_options)]
