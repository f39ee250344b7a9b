"""The simulated reviewers: their own latent-quality model (hand-computed), their own verdict
rule (threshold and floor, not the rubric's), disagreement at the stated rate, and no code shared
with the judge's verdict path (imports, called names, and a run with those functions broken)."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

from decision_pipeline.charter import checks, judge, reviews, rubric, store
from decision_pipeline.charter.reviews import (LATENT, ReviewerParams, ReviewsParams, expected_disagreement,
                                               latent_quality, measured_disagreement, panel_verdict, reviewer_accepts,
                                               seeded_reviews)
from decision_pipeline.common.codedeps import import_closure

ROOT = Path(__file__).resolve().parents[2]
P = lambda in_voice, engages, opener, cites, mentions: dict(in_voice=in_voice, engages=engages,  # noqa: E731
                                                             opener=opener, cites=cites, mentions=mentions)
RIGHT = {"first_person": P(True, True, False, "fitting", 3), "observer": P(True, True, False, "fitting", 2)}
BARE = {"first_person": P(True, True, False, "none", 3), "observer": P(True, True, False, "none", 2)}
SUMM = {"first_person": P(False, False, True, "none", 3), "observer": P(True, False, False, "none", 3)}
SIX = ("ada", "ben", "chen", "dara", "eli", "fay")


def _cfg(noise: float = 0.5, latent_sd: float = 0.25, **kw) -> ReviewsParams:
    people = {n: ReviewerParams(bias=b, noise=noise, threshold=t, floor=f) for n, b, t, f in
              zip(SIX, (0.0, 0.3, -0.3, 0.0, 0.2, -0.4), (3.9, 3.8, 4.0, 3.8, 3.9, 4.1), (2.3, 2.0, 2.5, 2.2, 2.4, 2.6))}
    base = dict(source="seeded", import_path="", n_reviews=240, n_reflections=120, reviewers=people,
                latent_sd=latent_sd, thread_rate=0.3, thread_fix=0.8)
    return ReviewsParams(**{**base, **kw})


def _reflections(n_docs: int = 60) -> list[dict]:
    out = []
    for name, props in (("good", RIGHT), ("bare", BARE), ("summ", SUMM)):
        out += [{"id": f"{name}/d{i:03d}", "doc_id": f"d{i:03d}", "candidate": name, "safety_score": i % 6,
                 "split": "validation" if i % 4 == 0 else "train", "properties": props} for i in range(n_docs)]
    out += [{"id": f"model/d{i:03d}", "doc_id": f"d{i:03d}", "candidate": "model", "safety_score": i % 6,
             "split": "train"} for i in range(n_docs)]   # an endpoint: no properties, never simulated
    return out


def test_latent_quality_is_the_documented_table_hand_computed():
    # cite nothing on a safety-2 document: grounding UNCITED_GROUNDING[2] = 2.2 (the judge's own rule
    # switches only at its harmful_from); specificity 3.2 + 0.5 x 3 = 4.7 (first person), 4.2 (observer)
    fp = latent_quality(BARE["first_person"], "first_person", 2)
    assert fp == pytest.approx({"relevance": 4.6, "specificity": 4.7, "charter_grounding": 2.2, "voice_tone": 4.7})
    assert latent_quality(BARE["observer"], "observer", 2)["specificity"] == pytest.approx(4.2)
    # the cost of citing nothing grows gradually with the safety score
    assert [latent_quality(BARE["observer"], "observer", s)["charter_grounding"] for s in range(6)] == \
        pytest.approx([4.1, 3.7, 2.2, 1.6, 1.3, 1.2])
    # summary + opener + wrong voice: relevance 2.4, specificity 3.2 + 1.5 - 0.6 = 4.1, tone 1.5 - 1.1 -> 1 (clipped)
    s = latent_quality(SUMM["first_person"], "first_person", 0)
    assert s == pytest.approx({"relevance": 2.4, "specificity": 4.1, "charter_grounding": 4.1, "voice_tone": 1.0})
    assert latent_quality(RIGHT["first_person"], "first_person", 5)["charter_grounding"] == LATENT["grounding"]["fitting"]


def test_a_reviewer_decides_with_their_own_threshold_and_floor_not_the_rubric_rule():
    perceived = np.full((2, 4), 4.2)
    perceived[1, 2] = 2.4                       # mean (7 x 4.2 + 2.4) / 8 = 3.975, lowest 2.4
    lenient = ReviewerParams(bias=0.0, noise=0.0, threshold=3.9, floor=2.3)
    assert reviewer_accepts(perceived, lenient)
    assert not reviewer_accepts(perceived, ReviewerParams(bias=0.0, noise=0.0, threshold=3.9, floor=2.5))
    assert not reviewer_accepts(perceived, ReviewerParams(bias=0.0, noise=0.0, threshold=4.0, floor=2.3))
    # the same reflection as rounded scores (4s and a 2): the rubric's rule would reject it
    scores = {v: {d: int(round(perceived[a, b])) for b, d in enumerate(rubric.DIMENSIONS)}
              for a, v in enumerate(rubric.VOICES)}
    assert rubric.verdict_rule(scores) == "reject"


def test_reviews_share_no_function_with_the_judges_verdict_code():
    judge_files = {Path("decision_pipeline/charter") / f for f in
                   ("judge.py", "checks.py", "directives.py", "judge_prompt.py")}
    reached = import_closure(ROOT, "decision_pipeline.charter.reviews")
    assert Path("decision_pipeline/charter/rubric.py") in reached
    assert not reached & judge_files                      # not even imported, directly or transitively
    # from rubric (the review store's schema) it takes constants only, never a function
    tree = ast.parse((ROOT / "decision_pipeline/charter/reviews.py").read_text())
    taken = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and
             n.module.endswith("rubric") for a in n.names}
    assert taken and not [n for n in taken if callable(getattr(rubric, n))]
    rubric_functions = {n for n, f in inspect.getmembers(rubric, inspect.isfunction) if f.__module__ == rubric.__name__}
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not called & rubric_functions


def test_reviews_are_the_same_with_the_judges_functions_broken(monkeypatch):
    before = seeded_reviews(_reflections(), _cfg(), seed=3)

    def boom(*a, **k):
        raise AssertionError("the reviewers called the judge's verdict code")
    for mod, names in ((rubric, ("verdict_rule", "verdict", "apply_effects", "forces_reject", "mean_score")),
                       (checks, ("hard_checks", "voice_flags")), (judge, ("judge_one", "judge_all"))):
        for n in names:
            monkeypatch.setattr(mod, n, boom)
            monkeypatch.setattr(reviews, n, boom, raising=False)   # a name imported into reviews, too
    assert seeded_reviews(_reflections(), _cfg(), seed=3) == before


def test_shape_both_splits_no_endpoint_and_scores_valid():
    recs = seeded_reviews(_reflections(), _cfg(), seed=1)
    revs = [r for r in recs if r["kind"] == "review"]
    assert len(revs) == 240 and len({r["annotation_id"] for r in revs}) == 120
    assert not any(r["annotation_id"].startswith("model/") for r in revs)
    split = {r["id"]: r["split"] for r in _reflections()}
    assert {split[r["annotation_id"]] for r in revs} == {"train", "validation"}
    store.validate_records([(f"r{i}", r) for i, r in enumerate(recs)])   # valid review records


def test_reviewers_disagree_at_the_stated_rate():
    refl = _reflections(120)
    cfg = _cfg(n_reviews=720, n_reflections=360)    # every reflection reviewed twice
    revs = [r for r in seeded_reviews(refl, cfg, seed=5) if r["kind"] == "review"]
    got = measured_disagreement(revs)
    reviewed = {r["annotation_id"] for r in revs}
    stated = expected_disagreement([r for r in refl if r["id"] in reviewed], cfg, seed=5)
    assert got["pairs"] == 360 and 0.05 < stated < 0.4
    assert got["rate_ci95"][0] <= stated <= got["rate_ci95"][1]
    # without noise, shift or different thresholds every reviewer agrees: rate 0, kappa 1
    same = {n: ReviewerParams(bias=0.0, noise=0.0, threshold=4.0, floor=2.5) for n in SIX}
    flat = _cfg(n_reviews=720, n_reflections=360, reviewers=same, latent_sd=0.0)
    quiet = measured_disagreement([r for r in seeded_reviews(refl, flat, seed=5) if r["kind"] == "review"])
    assert quiet["rate"] == 0.0 and quiet["kappa"] == 1.0 and expected_disagreement(refl, flat, 5) == 0.0


def test_measured_disagreement_hand_computed():
    revs = [{"id": f"r{i}", "annotation_id": a, "verdict": v} for i, (a, v) in
            enumerate([("a", "accept"), ("a", "reject"), ("b", "accept"), ("b", "accept"), ("c", "reject"),
                       ("c", "reject"), ("c", "accept"), ("d", "accept")])]
    got = measured_disagreement(revs)
    # pairs: a (1 differs), b (0), c: 3 pairs, 2 differ; d alone -> 5 pairs, 3 disagree
    assert got["pairs"] == 5 and got["disagree"] == 3 and got["rate"] == pytest.approx(0.6)


def test_threads_state_the_panel_verdict_when_they_fix():
    cfg = _cfg(thread_rate=1.0, thread_fix=1.0)
    refl = {r["id"]: r for r in _reflections()}
    recs = seeded_reviews(list(refl.values()), cfg, seed=2)
    by_review = {r["id"]: r for r in recs if r["kind"] == "review"}
    for c in (r for r in recs if r["kind"] == "comment"):
        target = refl[by_review[c["review_id"]]["annotation_id"]]
        assert c["verdict"] == panel_verdict(reviews.reflection_latent(target, cfg.latent_sd, 2), cfg.reviewers)
        assert c["reviewer"] != by_review[c["review_id"]]["reviewer"]


# ------------------------------------------------ the reference generators, too (issue 50)
JUDGE_FILES = {Path("decision_pipeline/charter") / f for f in ("judge.py", "checks.py", "directives.py", "judge_prompt.py")}
SIGNALS = ("decision_pipeline.charter.reviews", "decision_pipeline.charter.generators")


def _called_project_functions(path: Path) -> set[str]:
    """Names of charter functions a module imports and calls (from-imports of decision_pipeline.charter
    modules; the shared utilities of decision_pipeline.common, errors and params, are not the judge's)."""
    tree = ast.parse(path.read_text())
    imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                and n.module.startswith("decision_pipeline.charter.") for a in n.names}
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
            and n.func.id in imported}


def test_generators_and_reviews_share_no_function_with_the_judge():
    # not one judge module in the import closure of either signal
    reached = set().union(*(import_closure(ROOT, m) for m in SIGNALS))
    assert Path("decision_pipeline/charter/generators.py") in reached and not reached & JUDGE_FILES
    # every function the judge's modules call or define: no charter module of the signals calls one
    judge_side = set().union(*(_called_project_functions(ROOT / f) for f in JUDGE_FILES))
    judge_side |= {n.name for f in JUDGE_FILES for n in ast.walk(ast.parse((ROOT / f).read_text()))
                   if isinstance(n, ast.FunctionDef)}
    charter_modules = sorted(p for p in reached if p.parts[:2] == ("decision_pipeline", "charter")
                             and p.name != "charter.py")          # the charter document's own parser, read by both
    assert {p.name for p in charter_modules} >= {"generators.py", "reference_rules.py", "reviews.py", "prompts.py"}
    shared = {str(p): _called_project_functions(ROOT / p) & judge_side for p in charter_modules}
    assert not any(shared.values()), shared


def test_the_test_above_sees_a_shared_function(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("from decision_pipeline.charter.checks import relevant_sections\nrelevant_sections('a', 0, None)\n")
    assert _called_project_functions(planted) == {"relevant_sections"}


def test_references_write_the_same_with_the_judges_functions_broken(monkeypatch, charter):
    from decision_pipeline.charter import charter as charter_mod
    from decision_pipeline.charter.generators import PromptFollowingGenerator, ReferenceGenerator
    from decision_pipeline.charter.prompts import Prompt
    docs = [{"id": "d0", "text": "Q: How do I tighten the library after connecting the flour? I use Firefox.",
             "safety_score": 0},
            {"id": "d1", "text": "Thread: wild match | neon_gamer15: you idiot\nsalty_fox2: calm down", "safety_score": 4}]
    cfg = checks.CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5)
    told = Prompt("p", 1, "{charter}\n{document}\nSpeak as 'I'. Do not restate the text. Cite the section that fits.\n")
    gens = [ReferenceGenerator(k, k, charter, cfg) for k in ("ref_cite_right", "ref_cite_nothing", "ref_summarise")]
    gens.append(PromptFollowingGenerator("f", charter, cfg, told))
    before = [(g.reflect(docs), [g.properties(d) for d in docs]) for g in gens]

    def boom(*a, **k):
        raise AssertionError("a reference writer called the judge's code")
    for mod, names in ((checks, ("relevant_sections", "doc_keywords", "doc_register", "format_reflection",
                                 "split_voices", "hard_checks", "voice_flags")),
                       (judge, ("judge_one", "judge_all")), (rubric, ("verdict_rule", "verdict", "mean_score")),
                       (charter_mod, ("citations", "check_citations", "unknown_citations", "malformed_citations"))):
        for n in names:
            if hasattr(mod, n):
                monkeypatch.setattr(mod, n, boom)
    assert [(g.reflect(docs), [g.properties(d) for d in docs]) for g in gens] == before


def test_reference_reading_hand_computed_and_the_judge_may_disagree(charter):
    from decision_pipeline.charter.reference_rules import fitting_section, reading, topic_words
    # repeated words first (patch x3, server x2), then first seen; 'thread' and 4-letter words skipped
    assert topic_words("Thread: patch patch server. The patch broke the server, laggy rig.") == ["patch", "server",
                                                                                               "broke"]
    qa = "Q: How do I tighten the library? I am using Firefox."
    chat = "Thread: match\nneon_gamer15: omg the framerate\nsalty_fox2: cant wait"
    news = "Geneva, May 13 - Lindqvist criticised the company, calling it a senior ambassador."
    assert [reading(t, 0, 3) for t in (qa, chat, news)] == ["question", "exchange", "facts"]
    assert reading("buy now\nbuy now\nbuy now", 0, 3) == "junk"
    assert reading("Geneva - Keller told reporters the vote slipped.", 1, 3) == "reported"
    assert reading("you idiot, quit now", 4, 3) == "hostile" and reading("calm down both of you", 3, 3) == "heated"
    assert [fitting_section(t, 0, charter, 3) for t in (qa, chat, news)] == ["3.1", "2.3", "3.2"]
    # the judge reads this news item by its dateline and wants [1.2] or [4.2]: the reference says its [3.2]
    # is fitting, the judge does not agree, and scores grounding lower (the check is no longer circular)
    cfg = checks.CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5)
    assert "3.2" not in checks.relevant_sections(news, 0, cfg)
    from decision_pipeline.charter.directives import judge_rules
    from decision_pipeline.charter.generators import ReferenceGenerator
    gen = ReferenceGenerator("ref_cite_right", "ref_cite_right", charter, cfg)
    text = gen.one({"id": "n", "text": news, "safety_score": 0})
    assert "[3.2]" in text and gen.properties({"text": news, "safety_score": 0})["observer"]["cites"] == "fitting"
    item = {"document": news, "safety_score": 0, "voices": checks.split_voices(text)}
    scores = judge.RuleRubricJudge("rules", charter, cfg).scores(item, judge_rules("", "p", 3))
    assert scores["observer"]["charter_grounding"] < 5
