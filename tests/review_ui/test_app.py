"""The review app through Flask's test client: sign-in, the rubric form's validation,
duplicate submissions, who may edit what, comment threads and the reference verdict,
progress, drafts, and concurrent writers."""
from __future__ import annotations

import json
import re
import threading
import time

import pytest

from tests.review_ui.review_helpers import add_accounts, filled_form, login, make_annotations, rows, url

from decision_pipeline.review_ui import queries


def review_rows(path):
    return rows(path, "reviews")


# ------------------------------------------------------------------ sign-in

def test_empty_or_blank_name_is_rejected_with_a_message(app):
    c = app.test_client()
    for name in ("", "   ", "\t"):
        r = c.post("/login", data={"name": name})
        assert r.status_code == 400 and b"empty reviewer name is not allowed" in r.data
        assert c.get("/queue").status_code == 302          # still signed out


def test_too_long_name_rejected_and_name_normalised(app):
    c = app.test_client()
    assert c.post("/login", data={"name": "x" * 41}).status_code == 400
    assert login(c, "  Ada ").status_code == 302      # "Ada" is "ada": one reviewer, one account
    assert b"ada" in c.get("/queue").data


@pytest.mark.parametrize("name,secret,why", [
    ("ada", "wrong", b"Unknown reviewer or wrong secret"),
    ("ada", "", b"Unknown reviewer or wrong secret"),
    ("eve", "anything", b"Unknown reviewer or wrong secret"),            # no account: typing a name is not enough
    ("\u0430da", None, b"use only a-z, 0-9"),                           # Cyrillic a: a look-alike of ada
    ("Ada Lovelace", None, b"use only a-z, 0-9"),
])
def test_signing_in_needs_the_accounts_secret(app, name, secret, why):
    c = app.test_client()
    r = login(c, name, secret if secret is not None else "x")
    assert r.status_code == 400 and why in r.data
    assert c.get("/queue").status_code == 302  # still signed out


def test_signed_out_post_writes_nothing(app, store_path):
    r = app.test_client().post(url("ref_cite_right/ann-00", "/review"), data=filled_form())
    assert r.status_code == 401
    assert review_rows(store_path) == []


# --------------------------------------------------------------- validation

def test_valid_review_is_stored_as_submitted(ada, store_path):
    form = filled_form(4, "accept", "good")
    form[queries.score_field("observer", "specificity")] = "5"
    r = ada.post(url("ref_cite_right/ann-03", "/review"), data=form)
    assert r.status_code == 302 and r.location.startswith(url("ref_cite_right/ann-03"))
    [row] = review_rows(store_path)
    assert row["reviewer"] == "ada" and row["annotation_id"] == "ref_cite_right/ann-03" and row["verdict"] == "accept"
    assert json.loads(row["scores"])["observer"]["specificity"] == 5
    assert json.loads(row["scores"])["first_person"] == {"relevance": 4, "specificity": 4,
                                                         "charter_grounding": 4, "voice_tone": 4}
    assert row["notes"] == "good"


def _bad(ada, store_path, form, message: bytes, status: int = 400):
    r = ada.post(url("ref_cite_right/ann-00", "/review"), data=form)
    assert r.status_code == status, r.data[:300]
    assert message in r.data
    assert b"Not saved" in r.data or status != 400
    assert review_rows(store_path) == []
    return r


def test_score_outside_1_to_5_rejected(ada, store_path):
    for bad in ("6", "0", "-1"):
        form = filled_form()
        form[queries.score_field("first_person", "relevance")] = bad
        _bad(ada, store_path, form, f"score {int(bad)} is outside 1-5".encode())


def test_non_integer_score_rejected(ada, store_path):
    form = filled_form()
    form[queries.score_field("observer", "voice_tone")] = "4.5"
    _bad(ada, store_path, form, b"is not a whole number 1-5")


def test_missing_voice_rejected_and_form_keeps_the_rest(ada, store_path):
    form = {k: v for k, v in filled_form(notes="keep me").items() if not k.startswith("score-observer-")}
    r = _bad(ada, store_path, form, b"missing voice &#39;observer&#39;")
    html = r.data.decode()
    assert 'id="score-first_person-relevance-4" value="4" checked' in html      # what was filled stays
    assert "keep me</textarea>" in html


def test_missing_dimension_and_verdict_listed_together(ada, store_path):
    form = filled_form()
    del form[queries.score_field("first_person", "charter_grounding")]
    del form["verdict"]
    r = _bad(ada, store_path, form, b"first_person: missing score for charter_grounding")
    assert b"choose a verdict" in r.data


def test_unknown_annotation_is_404(ada):
    assert ada.get("/a/nope").status_code == 404
    assert ada.post("/a/nope/review", data=filled_form()).status_code == 404


# --------------------------------------------------------------- duplicates

def test_duplicate_submission_rejected_original_kept(ada, store_path):
    assert ada.post(url("ref_cite_right/ann-00", "/review"), data=filled_form(4, "accept")).status_code == 302
    r = ada.post(url("ref_cite_right/ann-00", "/review"), data=filled_form(2, "reject"))
    assert r.status_code == 409 and b"Duplicate submission" in r.data
    [row] = review_rows(store_path)
    assert row["verdict"] == "accept"


def test_racing_duplicate_submissions_write_one_row(app, store_path):
    clients = [app.test_client() for _ in range(4)]
    for c in clients:
        login(c, "ada")
    codes, barrier = [], threading.Barrier(len(clients))

    def go(c):
        barrier.wait()
        codes.append(c.post(url("ref_cite_right/ann-01", "/review"), data=filled_form()).status_code)
    threads = [threading.Thread(target=go, args=(c,)) for c in clients]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert sorted(codes) == [302, 409, 409, 409]
    assert len(review_rows(store_path)) == 1


def test_concurrent_reviewers_all_written(app, store_path):
    names = [f"r{i}" for i in range(6)]
    add_accounts(store_path, *names)
    errors = []

    def work(name):
        c = app.test_client()
        # six sign-ins at once may find every hashing slot busy: 429 with Retry-After, which a browser
        # retries; this test is about the writes, so it retries too (a bounded number of times)
        for _ in range(20):
            signed = login(c, name)
            if signed.status_code != 429:
                break
            time.sleep(float(signed.headers.get("Retry-After", 1)))
        if signed.status_code != 302:
            errors.append((name, "login", signed.status_code))
            return
        for a in range(4):
            code = c.post(url(f"ref_cite_right/ann-{a:02d}", "/review"), data=filled_form()).status_code
            code2 = c.post(f"/r/{queries.review_id(f'ref_cite_right/ann-{a:02d}', name)}/comment",
                           data={"body": f"{name} on {a}"}).status_code
            if (code, code2) != (302, 302):
                errors.append((name, a, code, code2))
    threads = [threading.Thread(target=work, args=(n,)) for n in names]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == []
    assert len(review_rows(store_path)) == 24 and len(rows(store_path, "review_comments")) == 24


# ------------------------------------------------------------------ editing

def test_nobody_edits_another_reviewers_review(ada, ben, store_path):
    ada.post(url("ref_cite_right/ann-02", "/review"), data=filled_form(4, "accept", "ada's"))
    rid = queries.review_id("ref_cite_right/ann-02", "ada")
    r = ben.get(f"/r/{rid}/edit")
    assert r.status_code == 403 and b"This review is by ada; you (ben) can comment on it but not edit it" in r.data
    r = ben.post(f"/r/{rid}/edit", data=filled_form(1, "reject", "ben's"))
    assert r.status_code == 403 and b"not edit it" in r.data
    [row] = review_rows(store_path)
    assert (row["reviewer"], row["verdict"], row["notes"]) == ("ada", "accept", "ada's")


def test_own_review_can_be_edited_with_validation(ada, store_path):
    ada.post(url("ref_cite_right/ann-02", "/review"), data=filled_form(4, "accept"))
    rid = queries.review_id("ref_cite_right/ann-02", "ada")
    page = ada.get(f"/r/{rid}/edit").data.decode()
    assert 'id="score-observer-voice_tone-4" value="4" checked' in page
    version = page.split('name="version" value="', 1)[1].split('"', 1)[0]
    bad = filled_form(2, "reject")
    bad[queries.score_field("observer", "relevance")] = "9"
    assert ada.post(f"/r/{rid}/edit", data={**bad, "version": version}).status_code == 400
    assert review_rows(store_path)[0]["verdict"] == "accept"
    good = {**filled_form(2, "reject", "changed my mind"), "version": version}
    assert ada.post(f"/r/{rid}/edit", data=good).status_code == 302
    [row] = review_rows(store_path)
    assert (row["verdict"], row["notes"], json.loads(row["scores"])["observer"]["relevance"]) == \
        ("reject", "changed my mind", 2)


# ----------------------------------------------------- threads and the rule

def _reference(client, ann: str) -> str:
    html = client.get(url(ann)).data.decode()
    start = html.index('id="reference"')
    return html[start:start + 200]


def test_thread_verdict_overrides_review_then_majority(ada, ben, store_path):
    ada.post(url("ref_cite_right/ann-04", "/review"), data=filled_form(4, "accept"))
    rid = queries.review_id("ref_cite_right/ann-04", "ada")
    assert "v-accept" in _reference(ada, "ref_cite_right/ann-04")
    # a remark without a verdict changes nothing
    assert ben.post(f"/r/{rid}/comment", data={"body": "hm, [2.1] fits?", "verdict": ""}).status_code == 302
    assert "v-accept" in _reference(ada, "ref_cite_right/ann-04")
    # the thread's latest verdict wins over the review
    ben.post(f"/r/{rid}/comment", data={"body": "it cites a section that does not exist", "verdict": "reject"})
    assert "v-reject" in _reference(ada, "ref_cite_right/ann-04")
    assert b"thread says <strong class=\"v-reject\">reject</strong>" in ada.get(url("ref_cite_right/ann-04")).data
    ada.post(f"/r/{rid}/comment", data={"body": "agreed after all, but the rest is good", "verdict": "accept"})
    assert "v-accept" in _reference(ada, "ref_cite_right/ann-04")
    # majority over reviews; a tie is reject
    ben.post(url("ref_cite_right/ann-04", "/review"), data=filled_form(2, "reject"))
    assert "v-reject" in _reference(ben, "ref_cite_right/ann-04")
    thread = rows(store_path, "review_comments")
    assert [c["verdict"] for c in sorted(thread, key=lambda c: c["created_at"])] == [None, "reject", "accept"]


def test_empty_comment_rejected_nothing_written(ada, ben, store_path):
    ada.post(url("ref_cite_right/ann-05", "/review"), data=filled_form())
    rid = queries.review_id("ref_cite_right/ann-05", "ada")
    r = ben.post(f"/r/{rid}/comment", data={"body": "  ", "verdict": "reject"})
    assert r.status_code == 400 and b"Write a comment" in r.data
    r = ben.post(f"/r/{rid}/comment", data={"body": "x", "verdict": "maybe"})
    assert r.status_code == 400 and b"unknown verdict" in r.data
    assert rows(store_path, "review_comments") == []


def test_others_reviews_hidden_until_you_review(ada, ben):
    ada.post(url("ref_cite_right/ann-06", "/review"), data=filled_form(4, "accept", "ada-notes"))
    page = ben.get(url("ref_cite_right/ann-06")).data
    assert b"hidden until you submit" in page and b"ada-notes" not in page
    assert b"ada-notes" in ben.get(url("ref_cite_right/ann-06") + "?show=reviews").data
    rid = queries.review_id("ref_cite_right/ann-06", "ada")
    r = ben.post(f"/r/{rid}/comment", data={"body": "before my own review"})
    assert b"before my own review" in ben.get(r.location).data          # the thread stays in view
    ben.post(url("ref_cite_right/ann-06", "/review"), data=filled_form(3, "reject"))
    assert b"ada-notes" in ben.get(url("ref_cite_right/ann-06")).data


# --------------------------------------------------------- queue, progress

def _queue(client) -> list[str]:
    """Annotation ids in the order the queue page lists them (from the public keys)."""
    keys = {queries.public_id(a["id"]): a["id"] for a in make_annotations()}
    html = client.get("/queue").data.decode()
    return [keys[k] for k in re.findall(r'<td><a href="/a/(x[0-9a-f]+)">', html)]


def test_queue_is_stratified_and_skips_own_reviews(ada, ben):
    order = _queue(ada)
    assert len(order) == 12
    scores = [int(a[-2:]) % 6 for a in order]
    assert scores == [0, 1, 2, 3, 4, 5] * 2                                       # round-robin over scores
    ada.post(url(order[0], "/review"), data=filled_form())
    assert order[0] not in _queue(ada) and len(_queue(ada)) == 11
    # for ben, the reviewed one moves behind the unreviewed one of the same score
    ben_order = _queue(ben)
    assert ben_order.index(order[0]) == 6 and ben_order[0] == order[6]
    assert "ref_cite_right" not in ada.get("/queue").data.decode()                  # blind: no generator name


def test_progress_counts_per_reviewer(ada, ben):
    for a in ("ref_cite_right/ann-00", "ref_cite_right/ann-01", "ref_cite_right/ann-02"):
        ada.post(url(a, "/review"), data=filled_form())
    ben.post(url("ref_cite_right/ann-00", "/review"), data=filled_form(2, "reject"))
    ben.post(f"/r/{queries.review_id('ref_cite_right/ann-00', 'ada')}/comment", data={"body": "no"})
    assert b"3 / 12 reviewed &middot; 0 comments" in ada.get("/queue").data
    html = ben.get("/queue").data.decode()
    assert "1 / 12 reviewed &middot; 1 comment<" in html
    assert "<td>ada</td><td>3 / 12</td><td>3</td><td>0</td>" in html
    assert "<td>ben</td><td>1 / 12</td><td>0</td><td>1</td>" in html


# ------------------------------------------------------------------- drafts

def test_draft_survives_a_new_session_and_is_cleared_on_submit(app, ada, store_path):
    form = filled_form(notes="half done")
    del form["verdict"]
    assert ada.post(url("ref_cite_right/ann-07", "/draft"), data=form).status_code == 302
    fresh = app.test_client()                      # a closed tab / new browser: only the name again
    login(fresh, "ada")
    page = fresh.get(url("ref_cite_right/ann-07")).data.decode()
    assert "half done</textarea>" in page and "Draft restored" in page
    assert 'id="score-observer-relevance-4" value="4" checked' in page
    r = fresh.post(url("ref_cite_right/ann-07", "/draft"), data={"notes": "more"}, headers={"X-Draft-Autosave": "1"})
    assert r.status_code == 200 and "saved_at" in r.get_json()
    assert review_rows(store_path) == []           # a draft is not a review
    fresh.post(url("ref_cite_right/ann-07", "/review"), data=filled_form())
    assert rows(store_path, "review_drafts") == []
    r = fresh.post(url("ref_cite_right/ann-07", "/draft"), data={"notes": "late"}, headers={"X-Draft-Autosave": "1"})
    assert r.status_code == 409 and rows(store_path, "review_drafts") == []


def test_drafts_are_per_reviewer(ada, ben):
    ada.post(url("ref_cite_right/ann-08", "/draft"), data={"notes": "ada's secret draft"})
    assert b"ada&#39;s secret draft" not in ben.get(url("ref_cite_right/ann-08")).data
    assert b"ada&#39;s secret draft" in ada.get(url("ref_cite_right/ann-08")).data


# ----------------------------------------------------------- page content

def test_citations_expanded_and_unknown_flagged(ada):
    html = ada.get(url("ref_cite_right/ann-03")).data.decode()
    assert '<a class="cite" href="#first_person-2.1">[2.1]</a>' in html
    assert "Insults, taunts and hostility aimed at people or groups" in html      # section 2.1's text
    assert "the charter has no section" not in html
    html = ada.get(url("ref_cite_right/ann-05")).data.decode()
    assert '<a class="cite unknown" href="#observer-9.9">[9.9]</a>' in html
    assert "the charter has no section 9.9" in html


def test_document_text_is_escaped(app, store_path, ada):
    from decision_pipeline.charter import store
    conn = store.open_store(store_path)
    store.add_annotations(conn, [{"id": "x", "doc_id": "d", "candidate": "c", "prompt_version": 1,
                                  "split": "train", "safety_score": 1, "document": "<script>alert(1)</script>",
                                  "reflection": "First person: I <b>see</b> [1.1]\nObserver: ok"}])
    conn.close()
    html = ada.get(url("x")).data.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "<b>see</b>" not in html
