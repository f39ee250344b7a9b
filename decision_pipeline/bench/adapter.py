"""Turn a pipeline model's answers into S1MB predictions (spec §3.3, adapter side of §9).

The model answers S1MB questions with the *same* prompt and readout code as the
pipeline's own questions (``decision_pipeline.decision``): each S1MB question becomes a
pipeline question dict, the option-label logits after ``Answer:`` are read in
one forward pass, and a per-task temperature softmax turns them into a full
distribution over the question's option ids.

Question mapping (``to_pipeline_question``)
    text    = decision system prompt (if any), the rendered input state (if not
              empty; ``render_state``) and the instructions, separated by blank
              lines — for the synthetic set (empty state) exactly the original
              question text;
    options = the criteria in authored order: id, description as the option
              text, value (score). The readout shows them as ``A)``, ``B)`` ...
    noul    = the authored ``false``/``true`` criteria, read like any other
              options; probabilities are keyed by option id, so ``p(true)`` is
              the probability of whichever label shows the ``true`` criterion.
    score   = the distribution over the criteria (scoring takes its expectation
              over the values).

Many options (``readout_distributions``; method ``CHUNK_METHOD``)
    The prompt has only ``len(LABELS)`` = 8 answer labels. A question with more
    options is split into balanced contiguous chunks of at most 8 in authored
    order (``chunk_bounds``: ceil(k/8) chunks whose sizes differ by at most
    one, larger ones first). Each chunk is read as a question with only its
    options; the winner of each chunk (its argmax, earliest on ties) goes into a
    final readout over the winners. The composed distribution
    (``compose_chunks``) is

        P(o) = P_final(winner of o's chunk) * P(o | o's chunk),

    which sums to 1 because each factor does. With more than 64 options the
    winners (more than 8) are themselves read with the same procedure, so the
    composition nests. Questions with at most 8 options get the plain readout,
    bit for bit. The method, chunk size and chunk counts go to
    ``model.settings.many_options`` of every result.

Temperatures (``load_readout_temperatures``)
    The per-task readout temperatures are the ones ``calibrate@<model>`` fitted
    for the same model (``temperatures.json``, key ``readout``; a task it kept
    at 1 or left out reads as 1.0), so S1MB scores the calibrated readout the
    pipeline's own evaluation uses. They go to ``model.settings.temperatures``.

Routed thinking (``route_fraction``; ``predict_cases`` returns both variants)
    One readout pass gives the readout-only predictions. A copy of them is then
    routed: of the questions with at most 8 options, the
    ``round(route_fraction * n)`` with the smallest readout margin (top-1 minus
    top-2 probability; ties by authored order) get one greedy thinking chain.
    If its answer parses, that question's readout is replaced by ``1 - eps`` on
    the parsed option and ``eps`` spread evenly over the others
    (``thinking_distribution``); if not, the readout distribution is kept.
    Every other question keeps its readout, so the two variants differ only on
    routed, parsed questions (identical when ``route_fraction`` is 0). Chunked
    questions are never routed (the answer letter could not name their options).

Every distribution is float64, clipped to [0, 1] and checked against the
library's rules (keys = option ids, |sum - 1| <= 1e-5) before it is returned.
"""
from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from decision_pipeline.bench.s1mb import TASKS, Case, Prediction, Question, check_probabilities
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import read_json
from decision_pipeline.questions.schema import LABELS
from decision_pipeline.lm.readout import softmax
from decision_pipeline.bench.params import S1mbParams  # re-exported: params live apart from torch

__all__ = [
    "CHUNK_SIZE", "CHUNK_METHOD", "ADAPTER_NAME", "S1mbParams", "Reader", "Predicted", "render_state",
    "load_readout_temperatures", "to_pipeline_question", "case_questions", "chunk_bounds", "compose_chunks",
    "readout_distributions", "model_reader", "margins", "select_routed", "thinking_distribution",
    "to_probabilities", "predict_cases",
]

CHUNK_SIZE = len(LABELS)
CHUNK_METHOD = "balanced-contiguous-chunks-winner-final-v1"
ADAPTER_NAME = "pipeline-label-readout"

#: Reads questions with at most ``CHUNK_SIZE`` options; returns one probability array each.
Reader = Callable[[Sequence[dict]], list[np.ndarray]]




@dataclass
class Predicted:
    """One benchmark's readout-only and routed predictions from a single readout pass, with their settings."""
    readout: list[Prediction]
    routed: list[Prediction]
    settings: dict[str, Any]
    routed_settings: dict[str, Any]
    readout_seconds: float
    routing_seconds: float


# ---------------------------------------------------------------- temperatures

def _temperature(path: Path, task: str, value: Any) -> float:
    """One readout temperature, checked: calibrate writes finite numbers > 0, anything else is a broken file."""
    if task not in TASKS:
        raise PipelineError(f"{path}: readout.{task}: unknown task; expected one of {', '.join(TASKS)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise PipelineError(f"{path}: readout.{task}: temperature must be a finite number > 0, got {value!r}; "
                            "rerun calibrate for this model")
    return float(value)


def load_readout_temperatures(path: str | Path, key: str = "readout", required: bool = True) -> dict[str, float]:
    """Per-task readout temperatures from calibrate's ``temperatures.json``; a task not there reads as 1.0.

    ``key="post_chain"`` reads the post-chain readout's temperatures (routed questions' probabilities);
    with ``required=False`` a file without that key reads as T = 1 for every task.

    Why from the file and not params: S1MB must score the same calibrated
    readout that ``evaluate`` reports for this model, with one definition of T.
    """
    path = Path(path)
    data = read_json(path)
    readout = data.get(key) if isinstance(data, dict) else None
    if readout is None and not required and isinstance(data, dict):
        readout = {}
    if not isinstance(readout, dict):
        raise PipelineError(f"{path}: expected an object with a '{key}' object of per-task temperatures "
                            "(as calibrate writes it); rerun calibrate for this model")
    fitted = {task: _temperature(path, task, value) for task, value in readout.items()}
    return {task: fitted.get(task, 1.0) for task in TASKS}


# ---------------------------------------------------------------- question mapping

def _line(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True,
                                                           separators=(",", ":"))


def render_state(state_json: str) -> str:
    """The input state as prompt text: '' when empty, a string as-is, messages as ``role: content``.

    Objects become one ``key: value`` line per key (``messages`` lists are
    expanded to ``role: content`` lines); anything else is compact sorted JSON.
    """
    state = json.loads(state_json) if state_json else None
    if state in (None, "", {}, []):
        return ""
    if isinstance(state, str):
        return state
    if not isinstance(state, dict):
        return _line(state)
    lines = []
    for key, value in state.items():
        if key == "messages" and isinstance(value, list) and all(isinstance(m, dict) for m in value):
            lines += [f"{m.get('role', 'message')}: {_line(m.get('content', ''))}" for m in value]
        else:
            lines.append(f"{key}: {_line(value)}")
    return "\n".join(lines)


def to_pipeline_question(case: Case, question: Question) -> dict:
    """One S1MB question as a pipeline question dict (see the module docstring)."""
    parts = [question.system_prompt.strip(), render_state(case.state_json), question.instructions]
    target = case.targets[question.id].probabilities
    ids = question.option_ids
    gold = max(ids, key=lambda i: (target[i], -ids.index(i)))  # earliest argmax, like scoring
    return {"id": f"{case.case_id}/{question.id}", "family": "s1mb", "level": 0, "task": question.task,
            "question": "\n\n".join(p for p in parts if p),
            "options": [{"id": o.id, "text": o.description, "value": o.value} for o in question.options],
            "gold": gold, "target": dict(target), "trace": ""}


def case_questions(cases: Sequence[Case]) -> list[tuple[Case, Question, dict]]:
    """Every (case, question, pipeline question) of the cases, in dataset order."""
    return [(c, q, to_pipeline_question(c, q)) for c in cases for q in c.questions]


# ---------------------------------------------------------------- chunked readout

def chunk_bounds(n_options: int, size: int = CHUNK_SIZE) -> list[tuple[int, int]]:
    """Balanced contiguous ``[start, end)`` chunks of at most ``size`` in authored order.

    ``ceil(n/size)`` chunks; sizes differ by at most one, the larger ones first
    (12 -> 6+6, 17 -> 6+6+5, 8 -> one chunk of 8).
    """
    if n_options < 1 or size < 2:
        raise ValueError(f"need n_options >= 1 and size >= 2, got {n_options}, {size}")
    count = -(-n_options // size)
    base, extra = divmod(n_options, count)
    bounds, start = [], 0
    for i in range(count):
        end = start + base + (i < extra)
        bounds.append((start, end))
        start = end
    return bounds


def compose_chunks(chunk_probs: Sequence[np.ndarray], final_probs: np.ndarray) -> np.ndarray:
    """P(o) = final_probs[chunk of o] * chunk_probs[chunk][o], concatenated in authored order.

    ``chunk_probs[c]`` is P(option | chunk c) (sums to 1); ``final_probs[c]`` is
    the final readout's probability of chunk c's winner. A single chunk with
    ``final_probs == [1]`` returns the chunk's own distribution.
    """
    if len(chunk_probs) != len(final_probs):
        raise ValueError(f"{len(chunk_probs)} chunks but {len(final_probs)} final probabilities")
    return np.concatenate([float(f) * np.asarray(p, dtype=np.float64) for p, f in zip(chunk_probs, final_probs)])


def _subquestion(q: dict, options: Sequence[dict], suffix: str) -> dict:
    """The same question over a subset of its options (gold/target dropped: they may not apply)."""
    sub = {k: v for k, v in q.items() if k not in ("gold", "target")}
    return {**sub, "id": f"{q['id']}#{suffix}", "options": list(options)}


def readout_distributions(read: Reader, questions: Sequence[dict], size: int = CHUNK_SIZE,
                          stats: dict | None = None, _depth: int = 1) -> list[np.ndarray]:
    """A distribution over every question's options; chunked (and nested) above ``size`` options.

    ``read`` is called once per nesting level with all the (sub)questions of
    that level, so batching is kept. ``stats`` (optional dict) is filled with
    ``chunked_questions``, ``max_chunks`` and ``depth`` for ``model.settings``.
    """
    plan: list[list[tuple[int, int]]] = [chunk_bounds(len(q["options"]), size) for q in questions]
    batch: list[dict] = []
    for q, bounds in zip(questions, plan):
        if len(bounds) == 1:
            batch.append(q)
        else:
            batch += [_subquestion(q, q["options"][a:b], f"c{i}") for i, (a, b) in enumerate(bounds)]
    probs = read(batch) if batch else []
    out: list[np.ndarray | None] = []
    finals: list[dict] = []
    pending: list[tuple[int, list[np.ndarray]]] = []
    cursor = 0
    for index, (q, bounds) in enumerate(zip(questions, plan)):
        if len(bounds) == 1:
            out.append(np.asarray(probs[cursor], dtype=np.float64))
            cursor += 1
            continue
        chunks = [np.asarray(p, dtype=np.float64) for p in probs[cursor:cursor + len(bounds)]]
        cursor += len(bounds)
        winners = [q["options"][a + int(np.argmax(p))] for (a, _), p in zip(bounds, chunks)]
        finals.append(_subquestion(q, winners, "final"))
        pending.append((index, chunks))
        out.append(None)
        if stats is not None:
            stats["chunked_questions"] = stats.get("chunked_questions", 0) + (_depth == 1)
            stats["max_chunks"] = max(stats.get("max_chunks", 0), len(bounds))
            stats["depth"] = max(stats.get("depth", 0), _depth)
    if finals:
        final_probs = readout_distributions(read, finals, size, stats, _depth + 1)
        for (index, chunks), fp in zip(pending, final_probs):
            out[index] = compose_chunks(chunks, fp)
    return out  # type: ignore[return-value]


def model_reader(model: Any, tok: Any, temperatures: Mapping[str, float], batch_size: int) -> Reader:
    """The pipeline readout (``decision_pipeline.decision.evaluate.answering.readout``) + per-task temperature softmax."""
    from decision_pipeline.decision.evaluate.answering import readout

    def read(questions: Sequence[dict]) -> list[np.ndarray]:
        logits = readout(model, tok, questions, batch_size)
        return [softmax(lg, temperatures.get(q["task"], 1.0)) for lg, q in zip(logits, questions)]

    return read


# ---------------------------------------------------------------- routed thinking

def margins(distributions: Sequence[np.ndarray]) -> np.ndarray:
    """Top-1 minus top-2 probability of each distribution."""
    return np.array([float(np.diff(np.sort(np.asarray(d))[-2:])[0]) for d in distributions])


def select_routed(distributions: Sequence[np.ndarray], fraction: float,
                  eligible: Sequence[bool] | None = None) -> list[int]:
    """Indices of the ``round(fraction * n_eligible)`` eligible questions with the lowest margin.

    Ties keep authored (dataset) order; the result is sorted ascending.
    """
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"route fraction must be in [0, 1], got {fraction}")
    eligible = [True] * len(distributions) if eligible is None else list(eligible)
    candidates = [i for i, ok in enumerate(eligible) if ok]
    k = math.floor(fraction * len(candidates) + 0.5)
    if k == 0:
        return []
    m = margins([distributions[i] for i in candidates])
    order = np.argsort(m, kind="stable")[:k]
    return sorted(candidates[int(i)] for i in order)


def thinking_distribution(n_options: int, index: int, eps: float) -> np.ndarray:
    """``1 - eps`` on the thinking answer, ``eps`` spread evenly over the other options."""
    if not 0 <= index < n_options or n_options < 2 or not 0.0 <= eps < 1.0:
        raise ValueError(f"bad thinking distribution: index {index}, {n_options} options, eps {eps}")
    out = np.full(n_options, eps / (n_options - 1), dtype=np.float64)
    out[index] = 1.0 - eps
    return out


def _route(model: Any, tok: Any, items: Sequence[dict], dists: list[np.ndarray],
           config: S1mbParams, seed: int, post_temperatures: Mapping[str, float], model_dir: str) -> dict[str, Any]:
    """Re-answer the lowest-margin questions by thinking (in place in ``dists``).

    A routed question takes the post-chain readout's probabilities (option-label logits after the closed
    chain, at the model's post-chain temperature); only where the chain never closed but an answer
    parsed does it fall back to ``1 - eps`` on the parsed letter; neither keeps the readout.
    """
    eligible = [len(q["options"]) <= CHUNK_SIZE for q in items]
    chosen = select_routed(dists, config.route_fraction, eligible)
    info = {"method": "lowest-margin-thinking-post-chain-v2", "fraction": config.route_fraction,
            "eps": config.route_eps, "backend": config.backend, "max_new_tokens": config.max_new_tokens,
            "sampling": "greedy", "post_chain_temperatures": {t: float(post_temperatures.get(t, 1.0)) for t in TASKS},
            "routed": len(chosen), "parsed": 0, "post_chain": 0, "one_hot_fallback": 0}
    if not chosen:
        return info
    from decision_pipeline.decision.evaluate.answering import thinking
    from decision_pipeline.lm.backends import SamplingSettings, backend_for_model

    backend = backend_for_model(config.backend, model, tok, model_dir, config.batch_size)
    settings = SamplingSettings(max_new_tokens=config.max_new_tokens, temperature=0.0, seed=seed,
                                stop_token_ids=(tok.eos_token_id,))
    records = thinking(backend, model, tok, [items[i] for i in chosen], settings, config.batch_size)
    for i, record in zip(chosen, records):
        info["parsed"] += record["thinking_pred"] is not None
        post = record.get("post_logits")
        if post is not None and len(post) == len(items[i]["options"]):
            dists[i] = softmax(np.asarray(post, dtype=np.float64), post_temperatures.get(items[i]["task"], 1.0))
            info["post_chain"] += 1
        elif record["thinking_pred"] is not None:
            dists[i] = thinking_distribution(len(items[i]["options"]), record["thinking_pred"], config.route_eps)
            info["one_hot_fallback"] += 1
    return info


# ---------------------------------------------------------------- predictions

def to_probabilities(question: Question, distribution: np.ndarray, /, **where: Any) -> dict[str, float]:
    """Key a distribution (authored option order) by option id; clip to [0, 1] and validate."""
    values = np.clip(np.asarray(distribution, dtype=np.float64), 0.0, 1.0)
    if values.shape != (len(question.options),):
        raise ValueError(f"distribution has shape {values.shape} for {len(question.options)} options")
    probabilities = {o.id: float(p) for o, p in zip(question.options, values)}
    check_probabilities(probabilities, question.option_ids, **where)
    return probabilities


def _keyed(items: Sequence[tuple[Case, Question, dict]], dists: Sequence[np.ndarray]) -> list[Prediction]:
    """One validated prediction per question (the result files must hold what scoring will accept)."""
    return [Prediction(case.case_id, question.id,
                       to_probabilities(question, dist, case=case.case_id, question=question.id))
            for (case, question, _), dist in zip(items, dists)]


def predict_cases(cases: Sequence[Case], read: Reader, config: S1mbParams, seed: int, *,
                  temperatures: Mapping[str, float], model: Any = None, tok: Any = None,
                  post_temperatures: Mapping[str, float] | None = None, model_dir: str = "") -> Predicted:
    """Readout-only and routed predictions for every question of ``cases``, and the settings of each.

    ``read`` is ``model_reader(...)`` for a real model (or any function with the
    same contract in tests) and applies ``temperatures``, which are recorded in
    the settings. The readout runs once; routing re-answers only the routed
    questions of a copy. ``model``/``tok`` are only needed when
    ``config.route_fraction`` > 0 (greedy thinking on ``config.backend``, seeded by ``seed``; ``model_dir``
    for a backend that loads the model itself); routed questions read out after the chain at
    ``post_temperatures`` (missing = T 1).
    """
    if config.route_fraction > 0 and (model is None or tok is None):
        raise ValueError("routed thinking needs the model and tokenizer")
    t0 = time.perf_counter()
    items = case_questions(cases)
    stats: dict[str, Any] = {}
    dists = readout_distributions(read, [pq for _, _, pq in items], CHUNK_SIZE, stats)
    settings: dict[str, Any] = {
        "readout": "option-label logits after 'Answer:' (decision_pipeline.decision.answering.readout), softmax",
        "temperatures": {t: float(temperatures.get(t, 1.0)) for t in TASKS},
        "many_options": {"method": CHUNK_METHOD, "chunk_size": CHUNK_SIZE,
                         "chunked_questions": stats.get("chunked_questions", 0),
                         "max_chunks": stats.get("max_chunks", 1), "depth": stats.get("depth", 0)},
        "routing": {"method": "none", "fraction": 0.0},
    }
    t1 = time.perf_counter()
    routed = list(dists)
    routing = (_route(model, tok, [pq for _, _, pq in items], routed, config, seed, post_temperatures or {},
                      str(model_dir)) if config.route_fraction > 0
               else settings["routing"])
    return Predicted(_keyed(items, dists), _keyed(items, routed), settings, {**settings, "routing": routing},
                     readout_seconds=t1 - t0, routing_seconds=time.perf_counter() - t1)
