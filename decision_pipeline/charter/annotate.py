"""Stage-level steps of generator selection (one call per entry module): reflect, judge,
reviews, agreement, throughput and ranking over plain records.

Why: entry modules stay thin (args -> config -> one call -> write); the orchestration
that joins seed documents, generators, the judge and the store lives here and is
testable without DVC.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from decision_pipeline.charter import store
from decision_pipeline.charter.agreement import LABELS, agreement_over_repeats
from decision_pipeline.charter.charter import Charter, load_charter
from decision_pipeline.charter.checks import CheckParams, parse_reflection, split_voices
from decision_pipeline.charter.generators import (CandidateParams, EndpointGenerator, check_candidate,
                                                  make_generator)
from decision_pipeline.charter.judge import JudgeParams, judge_all, make_judge
from decision_pipeline.charter.prompts import Prompt, load_prompt
from decision_pipeline.charter.ray_reflect import ReflectRayParams, reflect_on_ray
from decision_pipeline.charter.reviews import (PROVENANCE, ReviewsParams, expected_disagreement,
                                               measured_disagreement, seeded_reviews)
from decision_pipeline.charter.seed import SPLITS
from decision_pipeline.charter.rubric import VOICES
from decision_pipeline.charter.throughput import ThroughputParams, cost, measure, served
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import read_json
from decision_pipeline.common.params import rule
from decision_pipeline.common.raycluster import ENGINES, choose


@dataclass
class ReflectParams:
    charter: str = rule(doc="the charter file; prompts receive it through {charter}")
    candidates: dict[str, CandidateParams] = rule(doc="candidate name -> generator settings")
    engine: str = rule(run_control=True, choices=ENGINES, default="local",
                       doc="local: this process (an endpoint's requests `concurrency` at a time); ray: the seed "
                           "documents in chunks over `ray.workers` Ray actors, each its own generator (a served "
                           "replica per actor with serve_model): the same reflections, byte for byte")
    ray: ReflectRayParams = rule(run_control=True, default_factory=lambda: ReflectRayParams("auto"),
                                 doc="the Ray cluster and its actors (engine: ray only)")


@dataclass
class AgreementParams:
    n_resamples: int = rule(min=0, doc="bootstrap resamples for kappa's CI (over reflections)")
    confidence: float = rule(min=0.5, max=0.999, doc="CI level")


def candidate(cfg: ReflectParams, name: str) -> CandidateParams:
    if name not in cfg.candidates:
        raise PipelineError(f"candidate '{name}' is not in reflect.candidates ({', '.join(cfg.candidates)})")
    c = cfg.candidates[name]
    check_candidate(name, c)
    return c


def candidate_prompt(name: str, c: CandidateParams, charter: Charter) -> Prompt | None:
    """The candidate's loaded prompt (None for a reference generator without one)."""
    if c.kind == "endpoint" and not c.prompt:
        raise PipelineError(f"reflect.candidates.{name}.prompt: an endpoint candidate needs a prompt file")
    return load_prompt(c.prompt, charter) if c.prompt else None


def screen(name: str, throughput_metrics: Path) -> dict:
    """The cost screen as a gate: the candidate's throughput record (throughput@name runs
    first). `screened_out` is True when its GPU-hours exceed the budget; such a candidate is
    neither reflected nor judged (the stages write a small marker instead)."""
    path = Path(throughput_metrics) / f"{name}.json"
    if not path.exists():
        raise PipelineError(f"{path}: missing; run throughput@{name} first (the cost screen gates reflect and judge)")
    t = read_json(path)
    return {"screened_out": not t["affordable"], "gpu_hours": t.get("gpu_hours"),
            "budget_gpu_hours": t.get("budget_gpu_hours")}


def screened_out_metrics(name: str, gate: dict) -> dict:
    """The marker a screened-out candidate's reflect/judge stage writes instead of the work."""
    return {"candidate": name, "screened_out": True, "gpu_hours": gate["gpu_hours"],
            "budget_gpu_hours": gate["budget_gpu_hours"], "n": 0,
            "reason": "GPU-hours over throughput.gpu_hour_budget: not reflected, not judged"}


def check_judge_not_candidate(judge_cfg: JudgeParams, candidates: dict[str, CandidateParams]) -> None:
    """The judge never scores its own output: its name may not be a candidate's, nor (for an
    LLM judge) its model an endpoint candidate's model."""
    for name, c in candidates.items():
        same_model = judge_cfg.kind == "chat" and c.kind == "endpoint" and judge_cfg.model and judge_cfg.model == c.model
        if judge_cfg.name == name or same_model:
            what = f"model '{c.model}'" if same_model else f"name '{name}'"
            raise PipelineError(f"judge '{judge_cfg.name}' is also candidate '{name}' (same {what}); the judge never "
                                "scores its own output: set judge.model/judge.name to a model that is not in "
                                "reflect.candidates")


def reflect(name: str, cfg: ReflectParams, checks: CheckParams, docs: list[dict], seed: int,
            log_dir: Path | None = None) -> tuple[list, dict]:
    """One reflection record per seed document for candidate `name`, plus metrics. With `engine: ray` the
    documents are reflected in chunks by Ray actors (charter/ray_reflect.py; finished chunks logged in
    `log_dir`, the stage's out dir, so a rerun resumes): the same records as here."""
    c, charter = candidate(cfg, name), load_charter(cfg.charter)
    prompt = candidate_prompt(name, c, charter)
    version = prompt.version if prompt else 0
    started = time.perf_counter()
    run = choose(cfg, reflect_here, partial(reflect_on_ray, cfg=cfg.ray, log_dir=Path(log_dir or ".")))
    texts, truncated, gen = run(name, c, charter, checks, prompt, docs, seed)
    seconds = time.perf_counter() - started
    rows = [reflection_row(name, c.kind, version, d, text, gen) for d, text in zip(docs, texts)]
    missing = sum(1 for r in rows if not all(r["voices"][v] for v in VOICES))
    return rows, {"candidate": name, "kind": c.kind, "prompt_version": version, "n": len(rows),
                  "missing_voice": missing, "truncated_prompts": truncated, "seconds": seconds}


def reflect_here(name: str, c: CandidateParams, charter: Charter, checks: CheckParams, prompt: Prompt | None,
                 docs: list[dict], seed: int) -> tuple[list[str], int, object]:
    """`reflect.engine: local`: the reflections in this process (the candidate's model served here when it
    has serve_model), the truncated-prompt count and the generator (ray_reflect.reflect_on_ray's triple)."""
    if c.kind == "endpoint" and c.serve_model:
        with served(c.serve_model, c.model, timeout_s=120) as (url, _pid):
            gen = make_generator(name, c, charter, checks, prompt, url, seed)
            return gen.reflect(docs), gen.truncated_prompts, gen
    gen = make_generator(name, c, charter, checks, prompt, c.base_url, seed)
    texts = gen.reflect(docs)
    return texts, getattr(gen, "truncated_prompts", 0), gen  # a reference generator truncates nothing


def reflection_row(name: str, kind: str, version: int, doc: dict, text: str, gen: object) -> dict:
    """One reflection record; a reference generator's also states what it wrote (`properties`,
    read by the simulated reviewers)."""
    where = f"candidate '{name}' on '{doc['id']}'"
    row = {"id": f"{name}/{doc['id']}", "doc_id": doc["id"], "candidate": name, "kind": kind,
           "prompt_version": version, "split": doc["split"], "safety_score": doc["safety_score"],
           "document": doc["text"], "reflection": text,
           "voices": parse_reflection(text, where) if kind == "reference" else split_voices(text)}
    if kind == "reference":
        row["properties"] = gen.properties(doc)
    return row


def check_reflections(rows: list[dict], source: str) -> list[dict]:
    """Reject reflection records lacking a voice entry (hand-edited or foreign files)."""
    for i, r in enumerate(rows):
        voices = r.get("voices")
        if not isinstance(voices, dict):
            raise PipelineError(f"{source}:{i + 1}: reflection '{r.get('id', '?')}' has no 'voices' object")
        for v in VOICES:
            if not isinstance(voices.get(v), str):
                raise PipelineError(f"{source}:{i + 1}: reflection '{r.get('id', '?')}' is missing voice '{v}'")
    return rows


def judge(rows: list[dict], cfg: JudgeParams, charter_path: str) -> list[dict]:
    """Judge records for reflection rows (cfg.repeats runs each)."""
    charter = load_charter(charter_path)
    prompt = load_prompt(cfg.prompt, charter, kind="judge")
    records = judge_all(make_judge(cfg, charter), rows, prompt, charter, cfg)
    by_id = {r["id"]: r for r in rows}
    for rec in records:
        rec.update(candidate=by_id[rec["annotation_id"]]["candidate"], judge_prompt_version=prompt.version)
    return records


def annotations_from(reflections: list[dict], judged: list[dict]) -> list[dict]:
    """Store annotation rows: reflections with the judge's repeat-0 verdict and scores."""
    first = {j["annotation_id"]: j for j in judged if j["repeat"] == 0}
    out = []
    for r in reflections:
        j = first.get(r["id"], {})
        out.append({**{k: r[k] for k in store.ANNOTATION_FIELDS}, "judge_verdict": j.get("verdict"),
                    "judge_scores": j.get("scores")})
    return out


# Rows written into DVC outputs carry this fixed time, so the store's bytes depend only on its inputs.
REPRODUCIBLE_STAMP = "2026-01-01T00:00:00"


def build_reviews(reflections: list[dict], judged: list[dict], cfg: ReviewsParams, seed: int, out_dir: Path) -> dict:
    """A fresh store in out_dir: annotations, then records (simulated or imported) through the
    validating importer, then the export file. Returns counts and the reviewers' disagreement
    (measured; for simulated reviews also the model's stated rate). `judged` only fills the
    store's judge columns (the reviews stage passes none: it runs before the judge prompt is
    calibrated); simulated reviews never read it."""
    anns = annotations_from(reflections, judged)
    db = out_dir / "store.sqlite"
    conn = store.open_store(db)
    try:
        store.add_annotations(conn, anns)
        if cfg.source == "seeded":
            records = seeded_reviews(reflections, cfg, seed)
            n_rev, n_com = store.add_records(conn, [(f"seeded record {i}", r) for i, r in enumerate(records)])
        else:
            n_rev, n_com = store.import_jsonl(conn, cfg.import_path)
        store.export_jsonl(conn, out_dir / "export.jsonl")
        revs = store.reviews(conn)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    reviewed = {v["annotation_id"] for v in revs}
    by_split = Counter(r["split"] for r in reflections if r["id"] in reviewed)
    disagreement = measured_disagreement(revs)
    if cfg.source == "seeded":
        seen = [r for r in reflections if r["id"] in reviewed]
        disagreement["expected_rate"] = expected_disagreement(seen, cfg, seed)
        disagreement["expected_rule"] = ("model: mean over reviewed reflections and reviewer pairs of "
                                         "P(one accepts, the other rejects), 400 seeded noise draws each")
    return {"source": cfg.source, "reviewer_disagreement": disagreement,
            "provenance": PROVENANCE if cfg.source == "seeded" else f"imported: {cfg.import_path}",
            "reviews": n_rev, "comments": n_com, "reviewed_by_split": {sp: by_split[sp] for sp in SPLITS},
            "reflections_reviewed": len({r["annotation_id"] for r in revs}),
            "reviewers": len({r["reviewer"] for r in revs}), "schema_version": store.SCHEMA_VERSION}


def _accept_rates(judged: list[dict], ids: set[str]) -> dict[int, float | None]:
    """Accept rate per judge repeat over the reflections in `ids` (failures excluded)."""
    out: dict[int, list[bool]] = {}
    for j in judged:
        if j["annotation_id"] in ids and j["verdict"] is not None:
            out.setdefault(j["repeat"], []).append(j["verdict"] == "accept")
    return {r: (sum(v) / len(v) if v else None) for r, v in sorted(out.items())}


def judge_spread(judge_cfg: JudgeParams, per_repeat: dict, accept: dict[int, float | None]) -> dict:
    """kappa and accept rate over the judge's repeats: mean and range when the judge samples
    (chat with temperature > 0, a different sampling seed per repeat); the rule judge and a
    greedy chat judge are "deterministic" (their repeats are identical by construction)."""
    samples = judge_cfg.kind == "chat" and judge_cfg.temperature > 0
    kappas = [p["kappa"] for p in per_repeat.values() if p["kappa"] is not None]
    rates = [a for a in accept.values() if a is not None]
    def stats(xs: list[float]) -> dict:
        return {"mean": sum(xs) / len(xs) if xs else None, "min": min(xs) if xs else None,
                "max": max(xs) if xs else None, "range": (max(xs) - min(xs)) if xs else None}
    return {"mode": "sampled" if samples else "deterministic", "repeats": len(per_repeat),
            "sampling_seeds": "1000 x repeat + attempt" if samples else None,
            "kappa": stats(kappas), "accept_rate": stats(rates),
            "accept_rate_per_repeat": {str(r): a for r, a in accept.items()}}


def agreement(reflections: list[dict], judged: list[dict], export: Path, cfg: AgreementParams,
              judge_cfg: JudgeParams, seed: int, store_path: Path, provenance: str = "") -> tuple[dict, dict]:
    """Kappa of the judge vs the review reference: calibration on the TRAIN split (what a
    judge-prompt loop may look at), the final kappa with CI and concordance on the held-out
    VALIDATION split, scored once here. The validation rows are also recorded in the store's
    judge_correlations table. Returns (metrics, confusion on validation)."""
    conn = store.open_store(store_path)
    try:
        store.add_annotations(conn, annotations_from(reflections, judged))
        store.import_jsonl(conn, export)
        reference = store.reference_verdicts(store.reviews(conn), store.comments(conn))
        validation = {r["id"] for r in reflections if r["split"] == "validation"}
        train = {r["id"] for r in reflections if r["split"] == "train"}
        if len({reference[a] for a in reference if a in validation}) == 1:
            raise PipelineError(f"{export}: every validation reference verdict is "
                                f"'{next(reference[a] for a in reference if a in validation)}': kappa is undefined "
                                "with one label; review reflections the reviewers reject as well as accept")
        by_repeat: dict[int, dict[str, str]] = {}
        for j in judged:
            by_repeat.setdefault(j["repeat"], {})[j["annotation_id"]] = j["verdict"]
        n_train = sum(1 for a in reference if a in train and by_repeat[0].get(a) is not None)
        calibration = (agreement_over_repeats(by_repeat, reference, train, cfg.n_resamples, cfg.confidence, seed)
                       if n_train else None)
        result = agreement_over_repeats(by_repeat, reference, validation, cfg.n_resamples, cfg.confidence, seed)
        versions = sorted({j["judge_prompt_version"] for j in judged})
        now = REPRODUCIBLE_STAMP  # the store is a DVC output: a wall-clock stamp would change it every run
        store.record_correlations(conn, [{"judge": judge_cfg.name, "prompt_version": ",".join(map(str, versions)),
                                          "repeat": int(r), "n": v["n"], "kappa": v["kappa"],
                                          "concordance": v["concordance"], "created_at": now}
                                         for r, v in result["repeats"].items()])
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    pairs = Counter((by_repeat[0].get(a), h) for a, h in reference.items() if a in validation)
    confusion = {j: {h: pairs[(j, h)] for h in LABELS} for j in LABELS}
    failures = sum(1 for j in judged if j["verdict"] is None)
    cal = ({k: calibration[k] for k in ("kappa", "ci_low", "ci_high", "n", "concordance")}
           if calibration else {"kappa": None, "n": 0, "note": "no reviewed train reflection"})
    return {"judge": judge_cfg.name, "judge_kind": judge_cfg.kind, "judge_prompt_versions": versions,
            "repeats": judge_cfg.repeats, "judge_failures": failures,
            "calibration_split": "train", "calibration": cal, "final_split": "validation",
            "reviews_provenance": provenance,
            "judge_spread": judge_spread(judge_cfg, result["repeats"], _accept_rates(judged, validation)),
            "reviewed_validation": sum(1 for a in reference if a in validation),
            "reviewed_outside_validation": sum(1 for a in reference if a not in validation), **result}, confusion


def throughput(name: str, cfg: ReflectParams, tp: ThroughputParams, docs: list[dict], seed: int) -> tuple[dict, dict]:
    """(metrics, machine-dependent timings): docs/s after warm-up through the candidate's endpoint
    (served here when serve_model is set) and the GPU-hour extrapolation, per `throughput.mode`."""
    c, charter = candidate(cfg, name), load_charter(cfg.charter)
    if c.kind == "reference":
        version = load_prompt(c.prompt, charter).version if c.prompt else 0
        return {"candidate": name, "kind": "reference", "prompt_version": version, "docs_per_s": None,
                "gpu_hours": None, "wall_hours": None, "affordable": True, "device": "none (rule-based, no GPU)",
                "workload_docs": tp.workload_docs}, {}
    prompt = load_prompt(c.prompt, charter)
    if c.serve_model:
        with served(c.serve_model, c.model, tp.server_start_timeout_s) as (url, pid):
            gen = EndpointGenerator(name, c, prompt, charter, url, seed)
            m = measure(gen, docs, tp)
        where = {"server": f"decision_pipeline.lm.serve {c.serve_model} (started here, stopped by pid)", "device": "cpu"}
    else:
        gen = EndpointGenerator(name, c, prompt, charter, c.base_url, seed)
        m = measure(gen, docs, tp)
        where = {"server": c.base_url, "device": "endpoint"}
    metrics, timings = cost(m, c.gpus, tp)
    return {"candidate": name, "kind": "endpoint", "prompt_version": prompt.version, "warmup_docs": tp.warmup_docs, **metrics,
            "truncated_prompts": gen.truncated_prompts,
            "workload_docs": tp.workload_docs, "nodes": tp.nodes, "gpus_per_node": tp.gpus_per_node,
            "gpus_per_instance": c.gpus, "budget_gpu_hours": tp.gpu_hour_budget,
            **where}, timings
