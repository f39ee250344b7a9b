"""The UI's own queries, on a store built by hand: queue order, form parsing, names."""
from __future__ import annotations

import pytest
from tests.review_ui.review_helpers import filled_form

from decision_pipeline.charter import store
from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.review_ui import queries


def _ann(i: str, score: int, split: str = "validation") -> dict:
    return {"id": i, "doc_id": i, "candidate": "c", "prompt_version": 1, "split": split, "safety_score": score,
            "document": "d", "reflection": "First person: I x\nObserver: y"}


def _review(ann: str, who: str) -> dict:
    return {"id": queries.review_id(ann, who), "annotation_id": ann, "reviewer": who, "verdict": "accept",
            "scores": {v: {d: 4 for d in DIMENSIONS} for v in VOICES}, "notes": "",
            "created_at": "2026-01-01T00:00:00"}


@pytest.fixture()
def conn(tmp_path):
    c = store.open_store(tmp_path / "s.sqlite")
    queries.ensure_ui_tables(c)
    # ids in alphabetical order are NOT in stratified order: scores 0,0,0,1,1,5
    store.add_annotations(c, [_ann("a", 0), _ann("b", 0), _ann("c", 0, "train"), _ann("d", 1), _ann("e", 1),
                              _ann("f", 5)])
    yield c
    c.close()


def _by_key(*ids: str) -> list[str]:
    return sorted(ids, key=queries.public_id)


def test_queue_round_robins_over_safety_scores(conn):
    s0, s1 = _by_key("a", "b", "c"), _by_key("d", "e")           # ties inside a score: by public id
    expected = [s0[0], s1[0], "f", s0[1], s1[1], s0[2]]          # then round-robin over scores 0, 1, 5
    assert [q["id"] for q in queries.queue(conn, "ada")] == expected
    assert [q["id"] for q in queries.queue(conn, "ada", "train")] == ["c"]
    assert all(q["key"] == queries.public_id(q["id"]) and "candidate" not in q for q in queries.queue(conn, "ada"))


def test_queue_skips_own_and_puts_least_reviewed_first(conn):
    store.add_review(conn, _review("a", "ben"))
    store.add_review(conn, _review("d", "ada"))
    order = [q["id"] for q in queries.queue(conn, "ada")]
    s0 = _by_key("b", "c")
    assert order == [s0[0], "e", "f", s0[1], "a"]                # score 0: b, c (0 reviews) before a (1 review)


def test_public_id_round_trips(conn):
    assert queries.find_annotation(conn, queries.public_id("e")) == "e"
    assert queries.find_annotation(conn, "xnothere") is None


def test_progress_counts(conn):
    store.add_review(conn, _review("a", "ben"))
    store.add_review(conn, _review("b", "ben"))
    store.add_comment(conn, {"id": "c1", "review_id": queries.review_id("a", "ben"), "reviewer": "ada",
                             "verdict": None, "body": "hm", "created_at": "2026-01-02T00:00:00"})
    assert queries.progress(conn) == [
        {"reviewer": "ben", "reviews": 2, "comments": 0, "accepts": 2, "total": 6},
        {"reviewer": "ada", "reviews": 0, "comments": 1, "accepts": 0, "total": 6}]
    assert queries.reviewer_progress(conn, "ada") == {"reviewer": "ada", "reviews": 0, "total": 6, "comments": 1}


def test_review_from_form_parses_and_reports_every_problem():
    fields, errors = queries.review_from_form(filled_form(3, "reject", "  why  "))
    assert errors == [] and fields["verdict"] == "reject" and fields["notes"] == "why"
    assert fields["scores"]["observer"]["voice_tone"] == 3
    bad = {queries.score_field("first_person", d): "7" for d in DIMENSIONS}
    _, errors = queries.review_from_form(bad)
    assert errors[:1] == ["first_person.relevance: score 7 is outside 1-5"]
    assert "missing voice 'observer': score all four dimensions of both voices" in errors
    assert errors[-1] == "choose a verdict: accept or reject"


def test_update_review_only_by_its_author(conn):
    store.add_review(conn, _review("a", "ben"))
    rid = queries.review_id("a", "ben")
    new = {"scores": {v: {d: 2 for d in DIMENSIONS} for v in VOICES}, "verdict": "reject", "notes": "n"}
    version = queries.review_version(store.reviews(conn)[0])
    with pytest.raises(PipelineError, match="This review is by ben"):
        queries.update_review(conn, rid, "ada", new, version)
    assert store.reviews(conn)[0]["verdict"] == "accept"
    queries.update_review(conn, rid, "ben", new, version)
    assert store.reviews(conn)[0]["verdict"] == "reject"


@pytest.mark.parametrize("version", [None, ""])
def test_update_review_without_a_version_is_refused(conn, version):
    """Optimistic concurrency is not optional: no version, no overwrite (the caller shows the current text)."""
    store.add_review(conn, _review("a", "ben"))
    rid = queries.review_id("a", "ben")
    new = {"scores": {v: {d: 2 for d in DIMENSIONS} for v in VOICES}, "verdict": "reject", "notes": "n"}
    with pytest.raises(queries.StaleEdit, match="sent without the version") as err:
        queries.update_review(conn, rid, "ben", new, version)
    assert err.value.newer["verdict"] == "accept" and store.reviews(conn)[0]["verdict"] == "accept"


@pytest.mark.parametrize("name,ok", [("ada", "ada"), ("  Ada ", "ada"), ("\uff21\uff24\uff21", "ada"),
                                     ("  Ada  B ", None), ("\u0430da", None), ("", None), ("  ", None),
                                     ("a\x00b", None), ("x" * 41, None), ("o'brien", None)])
def test_clean_reviewer(name, ok):
    if ok is None:
        with pytest.raises(PipelineError):
            queries.clean_reviewer(name)
    else:
        assert queries.clean_reviewer(name) == ok
