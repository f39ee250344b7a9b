"""Judge sampled reasoning chains and keep one (or more) correct chain per question for SFT.

Lessons from the research being reproduced, encoded here:
- a "line repeated 3+ times" filter would have dropped 2,388 healthy chains (rules
  quoted several times, lists checked with the same phrase), so a loop is only
  *degenerate* repetition: a segment repeated back-to-back many times in the tail,
  a very low distinct n-gram ratio in the tail, or a cap hit (finish_reason "length");
- chains that invent look-ups ("I found similar examples online") are dropped;
- a model quirk string inside the thinking block is stripped, never the answer;
- the *shortest correct* chain per question is kept (median 920 vs 1,502 tokens).

A chain record: {"question_id", "sample", "source" ("base"|"teacher"), "text",
"token_ids", "finish_reason" ("stop"|"length"), "n_tokens"}.
"""
from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.hashing import make_random
from decision_pipeline.common.io import iter_jsonl
from decision_pipeline.common.log import progress
from decision_pipeline.decision.parsing import parse_with_reason, unparsed_by_reason
from decision_pipeline.decision.sft.config import SelectChainsParams
from decision_pipeline.questions.schema import THINK_CLOSE, THINK_OPEN, gold_index

DEFAULT_LOOKUP_PATTERNS: list[str] = [
    r"\bI (?:have |had |just )?(?:found|saw|came across|read|located)\b[^.\n]{0,80}?"
    r"\b(?:online|on the (?:web|internet)|on google|on wikipedia|on a (?:website|forum))",
    r"\b(?:according to|based on|from) (?:my|a|the|some) (?:quick |brief )?(?:web |online |google |internet )?"
    r"(?:search|searches|look-?up)\b",
    r"\bI (?:have |had |just )?looked (?:it |this |that |them |these )?up\b"
    r"(?![^.\n]{0,30}\b(?:in|on) the (?:list|options|question|table|text)\b)",
    r"\b(?:search|searching|searched|browsing|browsed|googling|scouring)"
    r" (?:the |on the )?(?:web|internet|online)\b",
    r"\b(?:google|web|internet|online) search(?:es)?\b",
    r"\bI (?:just )?googled\b",
    r"\b(?:similar|comparable|related) (?:examples?|questions?|problems?|cases?|puzzles?)"
    r" (?:that )?I (?:have |had )?(?:found|saw|looked up|came across|searched)\b",
    r"\b(?:wikipedia|a website|an online (?:source|dictionary|reference)|online sources?)"
    r" (?:says|said|states|stated|lists|listed|confirms|confirmed|shows|showed)\b",
    r"\b(?:checking|checked|consulting|consulted|look(?:ing)? (?:it )?up in) (?:an? )?"
    r"(?:online|external|web) (?:dictionary|database|source|reference|resource)s?\b",
]

DROP_REASONS = ("loop:cap", "loop:repeat", "lookup", "unparsed")
_FIX = {
    "loop:cap": "raise the generation token cap (max_new_tokens) or check the generator",
    "loop:repeat": "relax select_chains.loop.min_repeats / min_distinct or check the generator",
    "lookup": "check select_chains.lookup_patterns for over-broad patterns",
    "unparsed": "see unparsed_by_reason in the metrics: the model must close </think> and write 'Answer: X' "
                "(questions.ANSWER_INSTRUCTION)",
    "incorrect": "no chain answered correctly; use a stronger generator or easier questions",
}
_SOURCE_RANK = {"teacher": 0, "base": 1}
_WORD = re.compile(r"\w+|[^\w\s]+")
_MIN_NGRAMS = 32  # below this the distinct ratio is too noisy to call a loop
_RECORD_KEYS = ("question_id", "sample", "source", "text", "finish_reason", "n_tokens")


def split_thinking(text: str) -> tuple[str, str]:
    """(thinking, rest) split before the last `</think>` (as `parse_answer` reads the answer
    after the last one); with no `</think>` the whole text is an unterminated thinking block."""
    cut = text.rfind(THINK_CLOSE)
    return (text, "") if cut < 0 else (text[:cut], text[cut:])


def _has_periodic_run(ids: np.ndarray, min_repeats: int) -> bool:
    """True if some segment of p tokens repeats >= min_repeats times back-to-back.

    A run of r repeats with period p makes ids[i] == ids[i+p] hold for (r-1)*p
    consecutive i; a cumulative sum finds such a run in one vectorised pass per p.
    """
    n = len(ids)
    for p in range(1, n // min_repeats + 1):
        need = (min_repeats - 1) * p
        eq = (ids[p:] == ids[:-p]).astype(np.int64)
        csum = np.concatenate(([0], np.cumsum(eq)))
        if np.any(csum[need:] - csum[:-need] == need):
            return True
    return False


def detect_loop(text: str, finish_reason: str, *, min_repeats: int = 6, window: int = 400,
                ngram: int = 4, min_distinct: float = 0.3) -> str | None:
    """Why a chain is a loop: "cap", "repeat", or None for a healthy chain.

    - finish_reason "length" -> "cap": the model never closed its thinking.
    - "repeat": within the last `window` words of the thinking block, a segment
      (1..window//min_repeats words) repeats `min_repeats` times back-to-back, or
      fewer than `min_distinct` of the `ngram`-word n-grams there are distinct
      (catches loops whose period is too long for the back-to-back check).
    Repeats separated by other text (a rule quoted again, `word: no.` checklists)
    never trigger either test — that is the point. Words are lower-cased
    `\\w+` runs and punctuation runs.
    """
    if finish_reason == "length":
        return "cap"
    if min_repeats < 2 or window < min_repeats or ngram < 1 or not 0.0 <= min_distinct <= 1.0:
        raise PipelineError(f"select_chains.loop: need min_repeats >= 2, window >= min_repeats, ngram >= 1, "
                            f"0 <= min_distinct <= 1 (got {min_repeats}, {window}, {ngram}, {min_distinct}); "
                            "fix params.yaml")
    words = _WORD.findall(split_thinking(text)[0].replace(THINK_OPEN, " ").lower())[-window:]
    vocab: dict[str, int] = {}
    ids = np.array([vocab.setdefault(w, len(vocab)) for w in words], dtype=np.int64)
    if len(ids) >= min_repeats and _has_periodic_run(ids, min_repeats):
        return "repeat"
    grams = [tuple(words[i:i + ngram]) for i in range(len(words) - ngram + 1)]
    if len(grams) >= _MIN_NGRAMS and len(set(grams)) / len(grams) < min_distinct:
        return "repeat"
    return None


def _compile(patterns: Sequence[str]) -> list[re.Pattern]:
    out = []
    for pat in patterns:
        try:
            out.append(re.compile(pat, re.IGNORECASE))
        except re.error as exc:
            raise PipelineError(f"select_chains.lookup_patterns: {pat!r} is not a valid regex ({exc}); "
                                "fix params.yaml") from None
    return out


def find_lookup(text: str, patterns: Sequence[str] = DEFAULT_LOOKUP_PATTERNS) -> str | None:
    """The first pattern (case-insensitive regex) matching an invented look-up, or None.

    The decision model has no tools, so any claim of searching or finding things
    online is fabricated evidence; training on it would teach the fabrication.
    """
    for pat, rx in zip(patterns, _compile(patterns)):
        if rx.search(text):
            return pat
    return None


def strip_quirks(text: str, quirks: Sequence[str]) -> str:
    """Remove each literal quirk string from the thinking block only (before the last
    `</think>`); the answer after it is left byte-identical so parsing is unaffected."""
    if any(not q for q in quirks):
        raise PipelineError("select_chains.quirks contains an empty string; remove it from params.yaml")
    thinking, rest = split_thinking(text)
    for quirk in quirks:
        thinking = thinking.replace(quirk, "")
    return thinking + rest


def judge_chain(record: Mapping, question: Mapping, *, lookup_patterns: Sequence[str] = DEFAULT_LOOKUP_PATTERNS,
                quirks: Sequence[str] = (), loop_params: Mapping | None = None) -> dict:
    """A copy of `record` with cleaned `text`, `parsed`, `unparsed_reason`, `correct` and `drop_reason`.

    Drop precedence: loop:cap > loop:repeat > lookup > unparsed (a cap hit is
    usually unparsed too; reporting it as a loop says what to fix). `correct` is
    about the answer alone, so metrics can count correct-but-dropped chains.
    `token_ids`/`n_tokens` describe the generated text; SFT re-tokenises `text`.
    """
    missing = [k for k in _RECORD_KEYS if k not in record]
    if missing:
        raise PipelineError(f"chain record {record.get('question_id')!r}/{record.get('sample')!r} is missing "
                            f"{missing}; regenerate the chains")
    where = f"chain {record['question_id']!r} sample {record['sample']}"
    if record["question_id"] != question["id"]:
        raise PipelineError(f"{where}: paired with question {question['id']!r}; fix the chain/question join")
    if record["finish_reason"] not in ("stop", "length"):
        raise PipelineError(f"{where}: finish_reason {record['finish_reason']!r} is not 'stop' or 'length'; "
                            "regenerate the chains")
    params = dict(loop_params or {})
    unknown = set(params) - {"min_repeats", "window", "ngram", "min_distinct"}
    if unknown:
        raise PipelineError(f"select_chains.loop: unknown key(s) {sorted(unknown)}; use min_repeats, window, "
                            "ngram, min_distinct")
    text = strip_quirks(record["text"], quirks)
    parsed, why = parse_with_reason(text, len(question["options"]))
    loop = detect_loop(text, record["finish_reason"], **params)
    if loop:
        reason = f"loop:{loop}"
    elif find_lookup(text, lookup_patterns):
        reason = "lookup"
    else:
        reason = None if parsed is not None else "unparsed"
    return {**record, "text": text, "parsed": parsed, "unparsed_reason": why,
            "correct": parsed is not None and parsed == gold_index(question), "drop_reason": reason}


def _tie_key(c: Mapping) -> tuple:
    """Shortest first, then lower sample index, then teacher before base: at equal length
    the stronger model's chain is preferred, and a fixed order makes reruns pick the same."""
    return (c["n_tokens"], c["sample"], _SOURCE_RANK.get(c["source"], len(_SOURCE_RANK)))


def select_per_question(judged: Sequence[dict], strategy: str = "shortest", seed: int = 0) -> list[dict]:
    """Chains for SFT among kept (drop_reason None) and correct chains, per question in
    first-seen order: "shortest" (one, see `_tie_key`), "random" (one, drawn with a
    Random seeded by SHA-256 of seed and question id, independent of input order and
    of process hash salting) or "all" (every candidate, in `_tie_key` order)."""
    if strategy not in ("shortest", "random", "all"):
        raise PipelineError(f"select_chains.strategy {strategy!r} is not one of shortest, random, all; "
                            "fix params.yaml")
    groups: dict[str, list[dict]] = {}
    for c in judged:
        groups.setdefault(c["question_id"], [])
        if c["drop_reason"] is None and c["correct"]:
            groups[c["question_id"]].append(c)
    out: list[dict] = []
    for qid, cands in groups.items():
        if not cands:
            continue
        cands = sorted(cands, key=_tie_key)  # canonical order: input order never matters
        if strategy == "shortest":
            out.append(cands[0])
        elif strategy == "random":
            out.append(make_random(seed, "select_chains", qid).choice(cands))
        else:
            out.extend(cands)
    return out


def drop_counts(judged: Sequence[dict]) -> dict[str, int]:
    """Chains per outcome: each drop reason, "incorrect" (kept but wrong) and "ok"."""
    counts = Counter({r: 0 for r in (*DROP_REASONS, "incorrect", "ok")})
    for c in judged:
        counts[c["drop_reason"] or ("ok" if c["correct"] else "incorrect")] += 1
    return dict(counts)


def _median(values: list[float]) -> float | None:
    return float(statistics.median(values)) if values else None


def selection_metrics(questions: Sequence[dict], judged: Sequence[dict], kept: Sequence[dict]) -> dict:
    """Funnel metrics for review.

    Per-question statistics use all k samples before filtering: `correct_of_k`
    maps "0".."k" (k = most samples of any question) to the number of questions
    with that many correct chains (sums to the number of questions);
    `questions_with_correct` is the share with >= 1; `unanimity` the share whose
    samples all parsed to the same option. `loops_dropped`, `lookups_dropped` and
    `unparsed` count drop reasons, so they never double-count a chain;
    `unparsed_by_reason` splits every chain without a parsed answer (loops included) by what
    part of the format it missed (`parsing.UNPARSED_REASONS`).
    """
    by_id = {q["id"]: q for q in questions}
    per_q: dict[str, list[dict]] = defaultdict(list)
    for c in judged:
        if c["question_id"] not in by_id:
            raise PipelineError(f"select_chains: chain for unknown question {c['question_id']!r}; "
                                "regenerate chains for the current questions")
        per_q[c["question_id"]].append(c)
    k = max((len(v) for v in per_q.values()), default=0)
    correct_of_k = {str(i): 0 for i in range(k + 1)}
    unanimous = 0
    for q in questions:
        chains = per_q.get(q["id"], [])
        correct_of_k[str(sum(c["correct"] for c in chains))] += 1
        answers = {c["parsed"] for c in chains}
        unanimous += bool(chains) and len(answers) == 1 and None not in answers
    fam_total, fam_parsed = Counter(), Counter()
    src_total, src_parsed, src_correct = Counter(), Counter(), Counter()
    for c in judged:
        fam = (c["source"], by_id[c["question_id"]].get("family", "unknown"))
        fam_total[fam] += 1
        fam_parsed[fam] += c["parsed"] is not None
        src_total[c["source"]] += 1
        src_parsed[c["source"]] += c["parsed"] is not None
        src_correct[c["source"]] += bool(c["correct"])
    n_q = len(questions)
    counts = drop_counts(judged)
    return {
        "generated": len(judged),
        "parsed": sum(c["parsed"] is not None for c in judged),
        "kept": len(kept),
        "questions_with_correct": (n_q - correct_of_k.get("0", 0)) / n_q if n_q else 0.0,
        "correct_of_k": correct_of_k,
        "unanimity": unanimous / n_q if n_q else 0.0,
        "median_tokens_all": _median([c["n_tokens"] for c in judged]),
        "median_tokens_kept": _median([c["n_tokens"] for c in kept]),
        "loops_dropped": counts["loop:cap"] + counts["loop:repeat"],
        "lookups_dropped": counts["lookup"],
        "unparsed": counts["unparsed"],
        "unparsed_by_reason": unparsed_by_reason(c.get("unparsed_reason") for c in judged),
        "kept_tokens": sum(c["n_tokens"] for c in kept),
        # per source: in the default profile the teacher is the rule-based solver, so pooled rates
        # would report the solver's parse rate as the model's
        "by_source": {s: {"generated": src_total[s], "parse_rate": src_parsed[s] / src_total[s],
                          "correct": src_correct[s]} for s in sorted(src_total)},
        "parse_rate_by_family": {s: {f: fam_parsed[(s, f)] / fam_total[(s, f)] for (s2, f) in sorted(fam_total)
                                     if s2 == s} for s in sorted(src_total)},
        "drop_counts": counts,
    }


CHAIN_KEYS = ("id", "question_id", "source", "sample", "text", "finish_reason", "n_tokens")


def read_chain_log(path: str | Path) -> list[dict]:
    """generate's chains.jsonl, each record complete and its id unique: a hand-edited or merged log
    must fail on the line at fault, not as a KeyError or a silently double-counted chain."""
    records, seen = [], {}
    for lineno, row in iter_jsonl(path):
        missing = next((k for k in CHAIN_KEYS if k not in row), None)
        if missing:
            raise PipelineError(f"{path}:{lineno}: chain record lacks '{missing}'; rerun generate or remove the line")
        if row["id"] in seen:
            raise PipelineError(f"{path}:{lineno}: chain id {row['id']!r} repeats line {seen[row['id']]}; "
                                "remove the duplicate")
        seen[row["id"]] = lineno
        records.append(row)
    return records


def ensure_nonempty(kept: Sequence[dict], drop_counts: Mapping[str, int]) -> None:
    """Raise a one-line PipelineError naming the filter that removed the most chains
    when nothing was kept, so an empty SFT set fails here rather than in training."""
    if kept:
        return
    total = sum(drop_counts.values())
    losses = {r: n for r, n in drop_counts.items() if r != "ok" and n > 0}
    if not losses:
        raise PipelineError("select_chains: no chain was generated; check the generate stage's output")
    order = [*DROP_REASONS, "incorrect"]
    worst = max(losses, key=lambda r: (losses[r], -order.index(r) if r in order else -len(order)))
    fix = _FIX.get(worst, "check the generator")
    raise PipelineError(f"select_chains: no chain survived; {worst!r} removed {losses[worst]} of {total} — {fix}")


def select_chains(records: Sequence[dict], pool_by_id: Mapping[str, dict], p: SelectChainsParams,
                  seed: int) -> tuple[list[dict], dict]:
    """Judge every generated chain and keep per question by `p.strategy`; returns (kept, metrics).

    Metrics say where the kept chains came from (`kept_by_source`) and the parse
    rate per source, since in the default profile the teacher is the rule-based solver.
    """
    missing = sorted({r["question_id"] for r in records} - set(pool_by_id))
    if missing:
        raise PipelineError(f"chain for unknown question {missing[0]!r}; rerun generate")
    patterns = p.lookup_patterns or DEFAULT_LOOKUP_PATTERNS
    judged = [judge_chain(r, pool_by_id[r["question_id"]], lookup_patterns=patterns, quirks=p.quirks,
                          loop_params=asdict(p.loop)) for r in progress(records, desc="judge", unit="chain")]
    kept = select_per_question(judged, p.strategy, seed)
    ensure_nonempty(kept, drop_counts(judged))
    questions = [pool_by_id[q] for q in sorted({r["question_id"] for r in records})]
    metrics = selection_metrics(questions, judged, kept)
    sources = sorted({c["source"] for c in judged})
    metrics["kept_by_source"] = {s: sum(c["source"] == s for c in kept) for s in sources}
    metrics["base_correct_chains"] = sum(c["correct"] for c in judged if c["source"] == "base")
    keep_keys = ("id", "question_id", "source", "sample", "text", "n_tokens")
    return [{k: c[k] for k in keep_keys} for c in kept], metrics
