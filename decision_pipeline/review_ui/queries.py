"""Queries the review UI needs beyond the review store's API: the reviewer's queue,
progress counts, server-side drafts and editing one's own review.

Why: the store (decision_pipeline.charter.store) owns the schema of what the pipeline
reads (annotations, reviews, review_comments); the UI adds a ``review_drafts`` table
(never exported) so a half-filled form survives a closed tab, and the accounts and
sessions tables of review_ui/accounts.py (never exported either). Every write
here is one SQLite transaction on the store's WAL database, so several reviewers can
submit at once.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from datetime import datetime, timezone
from typing import Mapping

from decision_pipeline.charter.rubric import DIMENSIONS, VERDICTS, VOICES, validate_scores
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.review_ui.accounts import add_reviewer, ensure_account_tables, secret_hash  # noqa: F401 (re-exported)

_DRAFTS = """CREATE TABLE IF NOT EXISTS review_drafts (
    annotation_id TEXT NOT NULL REFERENCES annotations(id), reviewer TEXT NOT NULL CHECK (length(reviewer) > 0),
    fields TEXT NOT NULL CHECK (json_valid(fields)), updated_at TEXT NOT NULL,
    PRIMARY KEY (annotation_id, reviewer))"""
MAX_NOTES = 5000          # characters in review notes or a comment body
MAX_NAME = 40             # characters in a reviewer name


def now() -> str:
    """UTC timestamp, ISO-8601 with microseconds (orders comments written in one second)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def ensure_ui_tables(conn: sqlite3.Connection) -> None:
    """Create the UI's own tables (drafts, reviewer accounts and sessions) next to the store's tables."""
    with conn:
        conn.execute(_DRAFTS)
    ensure_account_tables(conn)


def review_version(rev: Mapping) -> str:
    """A short digest of what a review says now: an edit form carries it, and an edit made from an
    older version (a second tab) is refused with the newer text instead of silently overwriting it."""
    text = json.dumps([rev.get("scores"), rev.get("verdict"), rev.get("notes")], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def clean_reviewer(name: object) -> str:
    """A reviewer name from a login form in its one canonical form (security.normalise_name)."""
    from decision_pipeline.review_ui.security import normalise_name

    return normalise_name(name)


def review_id(annotation_id: str, reviewer: str) -> str:
    """Deterministic id of reviewer's review of an annotation: a double submission
    (two tabs, a double click) collides on the primary key instead of writing twice."""
    return "r-" + hashlib.sha256(f"{annotation_id}\0{reviewer}".encode()).hexdigest()[:16]


def public_id(annotation_id: str) -> str:
    """What pages and URLs call an annotation. Annotation ids name the generator
    ("candidate/doc"); reviewers must not see that, so the UI shows a hash instead."""
    return "x" + hashlib.sha256(annotation_id.encode()).hexdigest()[:10]


def find_annotation(conn: sqlite3.Connection, key: str) -> str | None:
    """The annotation id whose public_id is `key` (a scan: a store holds thousands at most)."""
    return next((r[0] for r in conn.execute("SELECT id FROM annotations") if public_id(r[0]) == key), None)


def comment_id(review: str, reviewer: str, created_at: str) -> str:
    return "c-" + hashlib.sha256(f"{review}\0{reviewer}\0{created_at}".encode()).hexdigest()[:16]


# ------------------------------------------------------------------ forms

def score_field(voice: str, dim: str) -> str:
    return f"score-{voice}-{dim}"


def review_from_form(form: Mapping[str, str]) -> tuple[dict, list[str]]:
    """(review fields, errors) from a submitted rubric form.

    Fields: ``scores`` {voice: {dimension: int}} (only what parsed), ``verdict``, ``notes``.
    Errors name every missing or bad field, so one round trip fixes all; the store's
    validate_scores then checks the result again (one rule for import and UI).
    """
    errors: list[str] = []
    scores: dict[str, dict[str, int]] = {}
    for voice in VOICES:
        missing = []
        for dim in DIMENSIONS:
            raw = (form.get(score_field(voice, dim)) or "").strip()
            if not raw:
                missing.append(dim)
                continue
            try:
                value = int(raw)
            except ValueError:
                errors.append(f"{voice}.{dim}: '{raw[:20]}' is not a whole number 1-5")
                continue
            if not 1 <= value <= 5:
                errors.append(f"{voice}.{dim}: score {value} is outside 1-5")
                continue
            scores.setdefault(voice, {})[dim] = value
        if len(missing) == len(DIMENSIONS):
            errors.append(f"missing voice '{voice}': score all four dimensions of both voices")
        elif missing:
            errors.append(f"{voice}: missing score for {', '.join(missing)}")
    verdict = (form.get("verdict") or "").strip()
    if verdict not in VERDICTS:
        errors.append("choose a verdict: accept or reject" if not verdict else f"unknown verdict '{verdict[:20]}'")
    notes = form.get("notes") or ""
    if len(notes) > MAX_NOTES:
        errors.append(f"notes are {len(notes)} characters; keep them under {MAX_NOTES}")
    if not errors:
        try:
            scores = validate_scores(scores, "review")
        except PipelineError as e:       # belt and braces: the store's own rule
            errors.append(str(e))
    return {"scores": scores, "verdict": verdict, "notes": notes.strip()}, errors


def form_from_review(review: Mapping) -> dict[str, str]:
    """The form fields that reproduce a stored review (for editing)."""
    fields = {score_field(v, d): str(review["scores"][v][d]) for v in VOICES for d in DIMENSIONS}
    fields.update(verdict=review["verdict"], notes=review["notes"])
    return fields


# ------------------------------------------------------------------ queue

def queue(conn: sqlite3.Connection, reviewer: str, split: str | None = None) -> list[dict]:
    """Annotations this reviewer has not reviewed, stratified by safety score.

    Round-robin over the safety scores present (0, 1, ..., 5, 0, 1, ...), so any prefix
    of the queue covers the scores evenly; inside a score the least-reviewed come first
    (ties by public_id, so one generator's reflections do not come in a row). Each row:
    id, key (public_id), doc_id, split, safety_score, n_reviews.
    """
    q = ("SELECT a.id, a.doc_id, a.split, a.safety_score, "
         "(SELECT count(*) FROM reviews r WHERE r.annotation_id = a.id) AS n_reviews "
         "FROM annotations a WHERE NOT EXISTS "
         "(SELECT 1 FROM reviews r WHERE r.annotation_id = a.id AND r.reviewer = ?)")
    args: list = [reviewer]
    if split:
        q, args = q + " AND a.split = ?", args + [split]
    strata: dict[int, list[dict]] = defaultdict(list)
    for row in conn.execute(q, args):
        strata[row["safety_score"]].append({**dict(row), "key": public_id(row["id"])})
    for rows in strata.values():
        rows.sort(key=lambda r: (r["n_reviews"], r["key"]))
    out, depth = [], 0
    while any(depth < len(rows) for rows in strata.values()):
        out.extend(strata[s][depth] for s in sorted(strata) if depth < len(strata[s]))
        depth += 1
    return out


def progress(conn: sqlite3.Connection, split: str | None = None) -> list[dict]:
    """Per reviewer: reviews written, comments written, accepts (sorted by reviews, name)."""
    total = conn.execute("SELECT count(*) FROM annotations" + (" WHERE split = ?" if split else ""),
                         (split,) if split else ()).fetchone()[0]
    rows = conn.execute(
        "SELECT reviewer, sum(n_reviews) AS reviews, sum(n_comments) AS comments, sum(accepts) AS accepts FROM ("
        " SELECT reviewer, count(*) AS n_reviews, 0 AS n_comments, sum(verdict = 'accept') AS accepts"
        " FROM reviews GROUP BY reviewer UNION ALL"
        " SELECT reviewer, 0, count(*), 0 FROM review_comments GROUP BY reviewer) GROUP BY reviewer").fetchall()
    out = [{"reviewer": r["reviewer"], "reviews": r["reviews"], "comments": r["comments"],
            "accepts": r["accepts"], "total": total} for r in rows]
    return sorted(out, key=lambda r: (-r["reviews"], r["reviewer"]))


def reviewer_progress(conn: sqlite3.Connection, reviewer: str) -> dict:
    """One reviewer's counts: reviews done, of how many annotations, comments written."""
    done = conn.execute("SELECT count(*) FROM reviews WHERE reviewer = ?", (reviewer,)).fetchone()[0]
    total = conn.execute("SELECT count(*) FROM annotations").fetchone()[0]
    n_comments = conn.execute("SELECT count(*) FROM review_comments WHERE reviewer = ?", (reviewer,)).fetchone()[0]
    return {"reviewer": reviewer, "reviews": done, "total": total, "comments": n_comments}


def my_review(conn: sqlite3.Connection, annotation_id: str, reviewer: str) -> str | None:
    row = conn.execute("SELECT id FROM reviews WHERE annotation_id = ? AND reviewer = ?",
                       (annotation_id, reviewer)).fetchone()
    return row[0] if row else None


def get_review(conn: sqlite3.Connection, rid: str) -> dict | None:
    row = conn.execute("SELECT * FROM reviews WHERE id = ?", (rid,)).fetchone()
    if row is None:
        return None
    d = dict(row)
    d["scores"] = json.loads(d["scores"])
    return d


# ---------------------------------------------------------------- editing

class StaleEdit(PipelineError):
    """The review changed since the edit form was loaded (carries the newer review)."""

    def __init__(self, newer: dict, missing: bool = False):
        super().__init__(
            "This edit was sent without the version it started from, so it could overwrite a newer "
            "edit; nothing was written. The current review is shown below: edit it here and save"
            if missing else
            "This review was changed in another tab or window since you opened it; "
            "the newer version is shown below: apply your edit to it")
        self.newer = newer


def update_review(conn: sqlite3.Connection, rid: str, reviewer: str, fields: Mapping, version: str | None) -> None:
    """Replace scores, verdict and notes of reviewer's own review `rid` in one transaction.

    Refuses (PipelineError, nothing written) a review that does not exist or is someone
    else's; the ownership test and the write happen under one write lock. `version` is the
    review_version the edit started from: an edit without one (None or "") is refused like a
    stale one (StaleEdit), so optimistic concurrency is never skipped by leaving the field out.
    """
    scores = validate_scores(fields["scores"], f"review '{rid}'")
    if fields["verdict"] not in VERDICTS:
        raise PipelineError(f"review '{rid}': verdict must be accept or reject")
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT reviewer, scores, verdict, notes FROM reviews WHERE id = ?", (rid,)).fetchone()
        if row is None:
            raise PipelineError(f"review '{rid}' does not exist")
        if row[0] != reviewer:
            raise PipelineError(f"This review is by {row[0]}; you ({reviewer}) can comment on it but not edit it")
        current = {"scores": json.loads(row[1]), "verdict": row[2], "notes": row[3]}
        if not version or version != review_version(current):
            raise StaleEdit(current, missing=not version)
        conn.execute("UPDATE reviews SET scores = ?, verdict = ?, notes = ? WHERE id = ? AND reviewer = ?",
                     (json.dumps(scores, sort_keys=True), fields["verdict"], fields["notes"], rid, reviewer))


# ----------------------------------------------------------------- drafts

def save_draft(conn: sqlite3.Connection, annotation_id: str, reviewer: str, form: Mapping[str, str]) -> bool:
    """Keep the rubric form's current fields (unvalidated, known keys only); False, and
    nothing kept, once the reviewer's review exists. The test and the write are one
    statement, so an autosave racing the submit cannot leave a stale draft behind."""
    keep = {score_field(v, d) for v in VOICES for d in DIMENSIONS} | {"verdict", "notes"}
    fields = {k: str(form[k])[:MAX_NOTES] for k in keep if form.get(k)}
    with conn:
        cur = conn.execute(
            "INSERT INTO review_drafts SELECT ?, ?, ?, ? WHERE NOT EXISTS "
            "(SELECT 1 FROM reviews WHERE annotation_id = ? AND reviewer = ?) "
            "ON CONFLICT (annotation_id, reviewer) DO UPDATE SET fields = excluded.fields, "
            "updated_at = excluded.updated_at",
            (annotation_id, reviewer, json.dumps(fields, sort_keys=True), now(), annotation_id, reviewer))
        return cur.rowcount > 0


def load_draft(conn: sqlite3.Connection, annotation_id: str, reviewer: str) -> dict | None:
    """{"fields": {...}, "updated_at": ...} or None."""
    row = conn.execute("SELECT fields, updated_at FROM review_drafts WHERE annotation_id = ? AND reviewer = ?",
                       (annotation_id, reviewer)).fetchone()
    return {"fields": json.loads(row[0]), "updated_at": row[1]} if row else None


def delete_draft(conn: sqlite3.Connection, annotation_id: str, reviewer: str) -> None:
    with conn:
        conn.execute("DELETE FROM review_drafts WHERE annotation_id = ? AND reviewer = ?", (annotation_id, reviewer))
