"""The review store: schema, validated all-or-nothing import, thread rule, export."""
from __future__ import annotations

import json
import re
import sqlite3

import pytest

from decision_pipeline.charter import store
from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.common.errors import PipelineError

SCORES = {v: {d: 4 for d in DIMENSIONS} for v in VOICES}


def ann(i: int, split: str = "validation") -> dict:
    return {"id": f"a{i}", "doc_id": f"d{i}", "candidate": "c", "prompt_version": 1, "split": split,
            "safety_score": i % 6, "document": "doc", "reflection": "First person: I ...\nObserver: The ..."}


def review(rid: str, a: str, who: str, verdict: str = "accept", t: str = "2026-01-01T10:00:00", **kw) -> dict:
    return {"kind": "review", "id": rid, "annotation_id": a, "reviewer": who, "scores": SCORES,
            "verdict": verdict, "notes": "", "created_at": t, **kw}


def comment(cid: str, rid: str, who: str, verdict, t: str) -> dict:
    return {"kind": "comment", "id": cid, "review_id": rid, "reviewer": who, "verdict": verdict, "body": "",
            "created_at": t}


@pytest.fixture
def conn(tmp_path):
    c = store.open_store(tmp_path / "s.sqlite")
    store.add_annotations(c, [ann(i) for i in range(5)])
    yield c
    c.close()


def write(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_schema_is_versioned_with_wal(conn, tmp_path):
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"annotations", "reviews", "review_comments", "judge_correlations", "schema_version"} <= tables
    assert store.schema_version(conn) == store.SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with sqlite3.connect(tmp_path / "s.sqlite") as other:
        other.execute("INSERT INTO schema_version VALUES (99)")
    with pytest.raises(PipelineError, match="schema v99 is newer"):
        store.open_store(tmp_path / "s.sqlite")


def test_import_then_export_round_trip(conn, tmp_path):
    rows = [review("r1", "a0", "ada"), review("r2", "a0", "ben", "reject"),
            comment("c1", "r2", "ada", None, "2026-01-01T11:00:00")]
    assert store.import_jsonl(conn, write(tmp_path / "in.jsonl", rows)) == (2, 1)
    n = store.export_jsonl(conn, tmp_path / "out.jsonl")
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert n == 3 and {r["id"] for r in out} == {"r1", "r2", "c1"}
    assert out[0]["scores"] == SCORES


@pytest.mark.parametrize("bad,match", [
    (review("r9", "a1", "eve", scores={v: {**{d: 4 for d in DIMENSIONS}, "relevance": 6} for v in VOICES}),
     r"in.jsonl:3: score 'first_person.relevance' = 6 is outside 1-5"),
    (review("r9", "a1", "eve", scores={"first_person": {d: 4 for d in DIMENSIONS}}),
     r"in.jsonl:3: missing voice 'observer'"),
    (review("r1", "a1", "eve"), r"in.jsonl:3: duplicate review id 'r1'"),
    (review("r9", "a0", "ada"), r"in.jsonl:3: duplicate review: 'ada' already reviewed 'a0'"),
    (review("r9", "a1", ""), r"in.jsonl:3: 'reviewer' must be a non-empty string"),
    (review("r9", "zz", "eve"), r"unknown annotation 'zz'"),
    (comment("c9", "nope", "eve", "accept", "2026-01-02T00:00:00"),
     r"in.jsonl:3: comment 'c9' is on review 'nope', which is neither in this file nor in the store"),
    (review("r9", "a0", "Ada "), r"in.jsonl:3: duplicate review: 'ada' already reviewed 'a0'"),
    (review("r9", "a1", "Ada Lovelace"), r"in.jsonl:3: reviewer name 'Ada Lovelace': names use only a-z"),
])
def test_bad_record_is_a_clear_error_and_nothing_is_written(conn, tmp_path, bad, match):
    good = [review("r1", "a0", "ada"), review("r2", "a2", "ben")]
    with pytest.raises(PipelineError, match=match):
        store.import_jsonl(conn, write(tmp_path / "in.jsonl", good + [bad]))
    assert conn.execute("SELECT count(*) FROM reviews").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM review_comments").fetchone()[0] == 0


def test_thread_verdict_overrides_the_review():
    revs = [review("r1", "a0", "ada", "accept"), review("r2", "a1", "ben", "reject"),
            review("r3", "a2", "chen", "accept"), review("r4", "a2", "dara", "reject")]
    coms = [comment("c1", "r1", "ben", "reject", "2026-01-02T00:00:00"),   # thread disagrees -> reject
            comment("c2", "r2", "ada", "accept", "2026-01-02T00:00:00"),
            comment("c3", "r2", "chen", "reject", "2026-01-03T00:00:00"),  # latest verdict in thread wins
            comment("c4", "r3", "eli", None, "2026-01-02T00:00:00")]       # remark without verdict: no change
    assert store.reference_verdicts(revs, coms) == {"a0": "reject", "a1": "reject", "a2": "reject"}  # a2 tie
    assert store.reference_verdicts(revs[2:3], coms) == {"a2": "accept"}


def test_ui_helpers_add_review_comment_and_correlations(conn):
    store.add_review(conn, {k: v for k, v in review("r1", "a3", "fay").items() if k != "kind"})
    store.add_comment(conn, {k: v for k, v in comment("c1", "r1", "ada", "reject", "2026-01-05T00:00:00").items()
                             if k != "kind"})
    assert [r["id"] for r in store.reviews(conn, "a3")] == ["r1"]
    assert store.comments(conn, "r1")[0]["verdict"] == "reject"
    store.record_correlations(conn, [{"judge": "j", "prompt_version": 2, "repeat": 0, "n": 10, "kappa": 0.5,
                                      "concordance": 0.8, "created_at": "2026-01-05T00:00:00"}])
    assert store.correlations(conn)[0]["kappa"] == 0.5
    assert store.get_annotation(conn, "a3")["split"] == "validation"


def test_import_counts_ada_and_ada_space_as_one_reviewer(conn, tmp_path):
    """The import normalises names as the review app does: 'Ada ' and 'ada' are one reviewer, stored as 'ada'."""
    rows = [review("r1", "a0", "Ada "), review("r2", "a1", "ada"), comment("c1", "r1", "\uff22en", None,
                                                                        "2026-01-02T00:00:00")]
    assert store.import_jsonl(conn, write(tmp_path / "in.jsonl", rows)) == (2, 1)
    assert {r["reviewer"] for r in store.reviews(conn)} == {"ada"}
    assert store.comments(conn)[0]["reviewer"] == "ben"  # a full-width letter is NFKC-folded


def test_a_name_stored_before_the_rule_still_blocks_a_second_review(conn, tmp_path):
    conn.execute("INSERT INTO reviews VALUES ('old', 'a0', 'Ada', ?, 'accept', '', '2026-01-01T00:00:00')",
                 (json.dumps(SCORES),))
    with pytest.raises(PipelineError, match="duplicate review: 'ada' already reviewed 'a0' \\(review 'old'"):
        store.import_jsonl(conn, write(tmp_path / "in.jsonl", [review("r1", "a0", "ada")]))


@pytest.mark.parametrize("name", ["ada", "Ada ", " ADA", "\uff21da", "ada_2", "a-b", "", " ", "Ada Lovelace",
                                  "\u0430da", "x" * 41, "x" * 40, "ß", "İ"])
def test_the_store_and_the_review_app_agree_on_every_name(name):
    """One rule for both (the app signs people in by it, the import counts reviewers by it)."""
    from decision_pipeline.review_ui.security import normalise_name

    def outcome(fn):
        try:
            return fn(name)
        except PipelineError:
            return "refused"
    assert outcome(store.normalise_reviewer) == outcome(normalise_name)


@pytest.mark.parametrize("head, named", [(b"\xef\xbb\xbf", "UTF-8 with a byte-order mark (BOM)"),
                                         (b"\xff\xfe", "UTF-16 (little-endian) with a byte-order mark")])
def test_an_import_saved_with_a_bom_names_it(conn, tmp_path, head, named):
    path = tmp_path / "in.jsonl"
    text = json.dumps(review("r1", "a0", "ada")) + "\n"
    path.write_bytes(head + text.encode("utf-16-le" if head == b"\xff\xfe" else "utf-8"))
    with pytest.raises(PipelineError, match=f"in.jsonl: is {re.escape(named)}; save it as UTF-8 without a byte-order mark"):
        store.import_jsonl(conn, path)
    assert conn.execute("SELECT count(*) FROM reviews").fetchone()[0] == 0
