"""The command line: `export` writes what the pipeline's `reviews` stage imports (a round
trip through the store's validating importer), `sync` copies reflections only."""
from __future__ import annotations

import json

from tests.review_ui.review_helpers import filled_form, make_annotations, rows, url

from decision_pipeline.charter import store
from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.review_ui import queries
from decision_pipeline.review_ui.cli import export_path, main


def _live(tmp_path, monkeypatch) -> str:
    live = str(tmp_path / "live.sqlite")
    monkeypatch.setenv("REVIEW_STORE", live)
    monkeypatch.setenv("REVIEW_ANNOTATIONS", str(tmp_path / "absent.sqlite"))
    return live


def test_export_round_trips_through_the_pipeline_importer(tmp_path, monkeypatch, app, ada, ben, store_path):
    ada.post(url("ref_cite_right/ann-01", "/review"), data=filled_form(4, "accept", "fine"))
    rid = queries.review_id("ref_cite_right/ann-01", "ada")
    ben.post(f"/r/{rid}/comment", data={"body": "no", "verdict": "reject"})
    ada.post(url("ref_cite_right/ann-02", "/draft"), data={"notes": "draft, not exported"})
    monkeypatch.setenv("REVIEW_STORE", store_path)
    out = tmp_path / "reviews" / "export.jsonl"
    assert main(["export", "--out", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["review", "comment"]
    assert "draft" not in out.read_text()
    fresh = store.open_store(tmp_path / "fresh.sqlite")      # what the `reviews` stage does with it
    store.add_annotations(fresh, make_annotations())
    assert store.import_jsonl(fresh, out) == (1, 1)
    assert store.reference_verdicts(store.reviews(fresh), store.comments(fresh)) == {"ref_cite_right/ann-01": "reject"}


def test_export_path_follows_params(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text("reviews:\n  source: import\n  import_path: somewhere/else.jsonl\n")
    assert export_path(str(params)) == "somewhere/else.jsonl"
    assert export_path(str(tmp_path / "none.yaml")) == "reviews/export.jsonl"


def test_export_without_a_store_fails_clearly(tmp_path, monkeypatch, capsys):
    _live(tmp_path, monkeypatch)
    assert main(["export", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "no review store yet" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_sync_copies_reflections_not_seeded_reviews(tmp_path, monkeypatch):
    live = _live(tmp_path, monkeypatch)
    source = tmp_path / "pipeline.sqlite"
    conn = store.open_store(source)
    store.add_annotations(conn, make_annotations(6))
    store.add_review(conn, {"id": "seeded-1", "annotation_id": "ref_cite_right/ann-00", "reviewer": "ada",
                            "scores": {v: {d: 4 for d in DIMENSIONS} for v in VOICES},
                            "verdict": "accept", "notes": "", "created_at": "2026-01-01T00:00:00"})
    conn.close()
    conn = store.open_store(source)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")          # as the `reviews` stage leaves it
    conn.close()
    before = source.read_bytes()
    monkeypatch.setenv("REVIEW_ANNOTATIONS", str(source))
    assert main(["sync"]) == 0
    assert source.read_bytes() == before                      # a DVC output: read, never written
    assert sorted(p.name for p in tmp_path.glob("pipeline.sqlite*")) == ["pipeline.sqlite"]
    assert len(rows(live, "annotations")) == 6 and rows(live, "reviews") == []
    assert main(["sync"]) == 0                                # idempotent
    assert len(rows(live, "annotations")) == 6


def test_reviewer_accounts_from_the_command_line(tmp_path, monkeypatch, capsys):
    """add-reviewer, add-reviewer --reset (flag before or after the name), remove-reviewer; the running
    server's side of it (sessions revoked, reviews kept) is in test_signin_http.py."""
    live = _live(tmp_path, monkeypatch)
    assert main(["remove-reviewer", "ada"]) == 2
    assert "no review store, so no reviewer to remove" in capsys.readouterr().err
    assert main(["add-reviewer", "ada"]) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["add-reviewer", "ada", "--reset"]) == 0
    second = capsys.readouterr().out.strip().splitlines()[-1]
    assert second != first and rows(live, "review_accounts")[0]["secret_hash"].startswith("scrypt:")
    assert main(["add-reviewer", "--reset"]) == 2 and "needs a NAME" in capsys.readouterr().err
    assert main(["export", "--reset"]) == 2 and "--reset belongs to add-reviewer" in capsys.readouterr().err
    assert main(["remove-reviewer", "ADA"]) == 0
    assert "reviewer 'ada' removed" in capsys.readouterr().out and rows(live, "review_accounts") == []
