"""The per-generator improver loop as a stage step (`improve@{candidate}`).

Why: the research improved each generator's prompt before ranking: reflections on a
fresh, larger document sample (never the reviewed seed items), the frozen judge's
failures summarised by rule, ONE targeted prompt edit per revision, re-judged, up to a
revision cap; the final prompt is the one `reflect@` uses and the ranking compares. The
loop itself is `improver.improve`; this module joins it to the candidate's generator
(served once for every revision), the judge and the sample, and writes the history.
Rule-based references are fixed rules of known quality: they ignore their prompt, so
their accept rate cannot move; the loop still runs for them and records the edits an
instruct model would be given. ``ref_follows_prompt`` is a rule stand-in that FOLLOWS its
prompt (generators.PromptFollowingGenerator), so its edits change what it writes and its
accept rate. Each revision's accept rate carries its Wilson 95% interval over the sample (the
noise it is compared against; the rule judge's repeats are identical, so the judge adds none):
``rise_beyond_noise`` says whether the final rate's interval lies above the first one's.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from pathlib import Path

from decision_pipeline.charter.agreement import wilson
from decision_pipeline.charter.annotate import ReflectParams, candidate, reflection_row
from decision_pipeline.charter.charter import load_charter
from decision_pipeline.charter.checks import CheckParams
from decision_pipeline.charter.generators import EndpointGenerator, reference_generator
from decision_pipeline.charter.improver import DeterministicImprover, EndpointImprover, improve
from decision_pipeline.charter.judge import JudgeParams, judge_all, make_judge
from decision_pipeline.charter.prompts import Prompt, load_prompt
from decision_pipeline.charter.seed import SeedSampleParams, sample_seed
from decision_pipeline.charter.throughput import served
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.common.params import rule

IMPROVERS = ("deterministic", "endpoint")
FINAL = "final.md"


@dataclass
class ImproveParams:
    improver: str = rule(choices=IMPROVERS, doc="deterministic = the library edit for the most frequent failure "
                                                "(CPU default); endpoint = an instruct model behind base_url")
    base_url: str = rule(doc="improver=endpoint: OpenAI-compatible /v1 URL of the improver model")
    model: str = rule(doc="improver=endpoint: improver model name")
    timeout_s: float = rule(min=0.1, doc="improver=endpoint: seconds per request")
    max_revisions: int = rule(min=0, max=20, doc="prompt edits at most (the research: up to ~10)")
    per_score: int = rule(min=1, doc="fresh documents per safety score 0-5 (disjoint from the reviewed seed "
                                     "sample; the research's sample was larger than the reviewed one)")


def make_improver(cfg: ImproveParams) -> DeterministicImprover | EndpointImprover:
    if cfg.improver == "endpoint":
        if not (cfg.base_url and cfg.model):
            raise PipelineError("improve.base_url and improve.model: the endpoint improver needs both")
        return EndpointImprover(cfg.base_url, cfg.model, cfg.timeout_s)
    return DeterministicImprover()


def improve_sample(pool: list[dict], seed_ids: set[str], cfg: ImproveParams, seed_cfg: SeedSampleParams,
                   seed: int) -> list[dict]:
    """Stratified fresh sample: the seed sampler's rule (same clipping and min length) over the
    pool minus every reviewed seed document; rows carry split 'improve'."""
    left = [d for d in pool if d["id"] not in seed_ids]
    rows = sample_seed(left, replace(seed_cfg, per_score=cfg.per_score), seed)
    if len(rows) < 6 * cfg.per_score:
        raise PipelineError(f"improve.per_score: only {len(rows)} pool documents outside the reviewed seed sample, "
                            f"{6 * cfg.per_score} asked; lower improve.per_score or enlarge the pool")
    return [{**r, "split": "improve"} for r in rows]


def run(name: str, cfg: ImproveParams, reflect_cfg: ReflectParams, judge_cfg: JudgeParams, docs: list[dict],
        seed: int, out_dir: Path) -> dict:
    """The loop for candidate `name`: prompt revisions v*.md and final.md in out_dir; returns
    the metrics (history per revision, the final version, the sample size)."""
    c, charter = candidate(reflect_cfg, name), load_charter(reflect_cfg.charter)
    prompt = load_prompt(c.prompt, charter)
    checks: CheckParams = judge_cfg.checks
    backend = make_judge(replace(judge_cfg, repeats=1), charter)   # frozen judge; flags equal in every repeat
    judge_prompt = load_prompt(judge_cfg.prompt, charter, kind="judge")

    counts: list[tuple[int, int]] = []   # (accepted, scored) per revision, in order

    def judge_fn(rows: list[dict]) -> list[dict]:
        records = judge_all(backend, rows, judge_prompt, charter, replace(judge_cfg, repeats=1))
        scored = [r for r in records if r["verdict"] is not None]
        counts.append((sum(r["verdict"] == "accept" for r in scored), len(scored)))
        return records

    with (served(c.serve_model, c.model, timeout_s=120) if c.kind == "endpoint" and c.serve_model
          else contextlib.nullcontext((c.base_url, None))) as (url, _pid):
        def reflect_fn(p: Prompt) -> list[dict]:
            gen = (reference_generator(name, c.reference, charter, checks, p) if c.kind == "reference"
                   else EndpointGenerator(name, c, p, charter, url, seed))
            return [reflection_row(name, c.kind, p.version, d, t, gen) for d, t in zip(docs, gen.reflect(docs))]

        history = improve(prompt, charter, reflect_fn, judge_fn, make_improver(cfg), cfg.max_revisions, out_dir)
    final = Path(history[-1]["prompt_file"])
    write_text_atomic(out_dir / FINAL, final.read_text())
    for row, (k, n) in zip(history, counts):
        row["prompt_file"] = Path(row["prompt_file"]).name
        row["accept_rate_ci95"] = list(wilson(k, n))
    rates = [h["accept_rate"] for h in history]
    first, last = history[0]["accept_rate_ci95"], history[-1]["accept_rate_ci95"]
    return {"candidate": name, "kind": c.kind, "improver": cfg.improver, "n_docs": len(docs),
            "sample": "stratified over safety scores, disjoint from the reviewed seed sample",
            "revisions": len(history) - 1, "versions": len(history), "start_version": history[0]["version"],
            "final_version": history[-1]["version"], "accept_rate_start": rates[0], "accept_rate_final": rates[-1],
            "follows_prompt": c.kind != "reference" or c.reference == "ref_follows_prompt",
            "noise": "Wilson 95% interval of each revision's accept rate over the sample; judge repeat spread "
                     + ("0 (deterministic rule judge)" if judge_cfg.kind == "rules" or judge_cfg.temperature == 0
                        else "not measured here (one repeat)"),
            "rise_beyond_noise": bool(first[1] is not None and last[0] is not None and last[0] > first[1]),
            "stopped": _stop_reason(history, cfg.max_revisions),
            "history": history}


def _stop_reason(history: list[dict], max_revisions: int) -> str:
    """Why the loop ended, in words a reader of the metrics understands."""
    if len(history) > max_revisions:
        return "max_revisions"
    if not any(history[-1]["failures"].values()):
        return "no failure left"
    return "the improver has no new edit for the failures left"
