"""The review store: a versioned SQLite database of annotations, human reviews, review
comments and judge-vs-human correlations.

Why: the judge is only trusted as far as it agrees with people. Reviews and the
threads reviewers write on each other's reviews live in one SQLite file (WAL mode,
every write in a transaction, validated before anything is written); the pipeline
depends on a JSONL *export* of it (tracked, so new reviews rerun ``judge_agreement``),
never on the live database.

Records (JSONL, one object a line, ``kind`` says which):
- review: ``{"kind": "review", "id", "annotation_id", "reviewer", "scores":
  {voice: {dimension: 1-5}}, "verdict": "accept"|"reject", "notes", "created_at"}``
- comment: ``{"kind": "comment", "id", "review_id", "reviewer", "verdict":
  "accept"|"reject"|null, "body", "created_at"}``
``created_at`` is ISO-8601; comments on a review form its thread. Reference rule
(``reference_verdicts``): a thread that carries a verdict overrides its review.

Reviewer names are stored in one canonical form (``normalise_reviewer``: NFKC, trimmed,
case-folded, [a-z0-9_-], 1-40 characters), the web app's rule, applied on every write, so an
imported ``Ada `` and ``ada`` are one reviewer (one review per annotation, one voice in kappa).
An import file is UTF-8 without a byte-order mark (common/textfile.py): a BOM or UTF-16 is named
instead of reported as malformed JSON on line 1.

Public API: normalise_reviewer, open_store, add_annotations, annotations, get_annotation, add_review,
add_comment, reviews, comments, validate_records, read_records, import_jsonl,
export_records, export_jsonl, reference_verdicts, effective_verdict,
record_correlations, correlations.
"""
from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Iterable, Mapping

from decision_pipeline.charter.rubric import VERDICTS, validate_scores
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import iter_jsonl, write_jsonl
from decision_pipeline.common.textfile import check_head

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS annotations (
    id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, candidate TEXT NOT NULL,
    prompt_version INTEGER NOT NULL, split TEXT NOT NULL CHECK (split IN ('train', 'validation')),
    safety_score INTEGER NOT NULL CHECK (safety_score BETWEEN 0 AND 5),
    document TEXT NOT NULL, reflection TEXT NOT NULL,
    judge_verdict TEXT CHECK (judge_verdict IN ('accept', 'reject')), judge_scores TEXT);
CREATE TABLE IF NOT EXISTS reviews (
    id TEXT PRIMARY KEY, annotation_id TEXT NOT NULL REFERENCES annotations(id),
    reviewer TEXT NOT NULL CHECK (length(reviewer) > 0), scores TEXT NOT NULL CHECK (json_valid(scores)),
    verdict TEXT NOT NULL CHECK (verdict IN ('accept', 'reject')), notes TEXT NOT NULL,
    created_at TEXT NOT NULL, UNIQUE (annotation_id, reviewer));
CREATE TABLE IF NOT EXISTS review_comments (
    id TEXT PRIMARY KEY, review_id TEXT NOT NULL REFERENCES reviews(id),
    reviewer TEXT NOT NULL CHECK (length(reviewer) > 0),
    verdict TEXT CHECK (verdict IN ('accept', 'reject')), body TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS judge_correlations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, judge TEXT NOT NULL, prompt_version TEXT NOT NULL,
    repeat INTEGER NOT NULL, n INTEGER NOT NULL, kappa REAL, concordance REAL NOT NULL,
    created_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS reviews_by_annotation ON reviews(annotation_id);
CREATE INDEX IF NOT EXISTS comments_by_review ON review_comments(review_id);
"""
ANNOTATION_FIELDS = ("id", "doc_id", "candidate", "prompt_version", "split", "safety_score",
                     "document", "reflection")
REVIEW_FIELDS = ("kind", "id", "annotation_id", "reviewer", "scores", "verdict", "notes", "created_at")
COMMENT_FIELDS = ("kind", "id", "review_id", "reviewer", "verdict", "body", "created_at")
MAX_REVIEWER_NAME = 40
REVIEWER_NAME_RULE = re.compile(r"[a-z0-9][a-z0-9_-]{0,%d}" % (MAX_REVIEWER_NAME - 1))


def normalise_reviewer(raw: object) -> str:
    """The canonical reviewer name (NFKC, trimmed, case-folded: "Ada " is "ada"), or a PipelineError
    saying what names may hold. One rule for the web app's sign-in and the import: a look-alike
    or a differently cased name would otherwise count as a second reviewer."""
    text = unicodedata.normalize("NFKC", raw if isinstance(raw, str) else "").strip().casefold()
    if not text:
        raise PipelineError("reviewer name is empty; give the reviewer's name")
    if len(text) > MAX_REVIEWER_NAME:
        raise PipelineError(f"reviewer name is {len(text)} characters; use at most {MAX_REVIEWER_NAME}")
    if not REVIEWER_NAME_RULE.fullmatch(text):
        raise PipelineError(f"reviewer name {raw!r}: names use only a-z, 0-9, '-' and '_' "
                            "(no spaces or look-alike letters)")
    return text


def _canonical_or_raw(name: str) -> str:
    """A stored name in canonical form where it has one (stores written before the rule may hold 'Ada')."""
    try:
        return normalise_reviewer(name)
    except PipelineError:
        return name


def _reviewer(rec: Mapping, where: str) -> str:
    raw = rec.get("reviewer")
    if not isinstance(raw, str) or not raw.strip():
        raise PipelineError(f"{where}: 'reviewer' must be a non-empty string, got {raw!r}")
    try:
        return normalise_reviewer(raw)
    except PipelineError as exc:
        raise PipelineError(f"{where}: {exc}") from None


# ------------------------------------------------------------------ opening

def open_store(path: str | Path) -> sqlite3.Connection:
    """Open (creating or upgrading) the store at `path`; WAL journal, foreign keys on.

    A database written by a newer schema than this code knows is refused.
    """
    p = Path(path)
    if p.is_dir():
        raise PipelineError(f"{p}: is a directory, not a review store; point the path at the store's .sqlite file")
    p.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(p), timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        conn.execute("PRAGMA journal_mode=WAL")  # the first read of the file: not SQLite fails here, unchanged
        conn.execute("PRAGMA foreign_keys=ON")
        with conn:
            for stmt in filter(None, (s.strip() for s in _SCHEMA.split(";"))):
                conn.execute(stmt)
            version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
            if version is None:
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:  # not SQLite, or its schema pages damaged
        conn.close()
        raise PipelineError(f"{p}: not a review store ({' '.join(str(exc).split())[:80]}); point the path at the "
                            "review store (an SQLite file), restore it from a backup, or move this file away") from None
    if version is not None and version > SCHEMA_VERSION:
        conn.close()
        raise PipelineError(f"{p}: review store schema v{version} is newer than this code (v{SCHEMA_VERSION}); "
                            "update the code")
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT max(version) FROM schema_version").fetchone()[0])


# -------------------------------------------------------------- annotations

def add_annotations(conn: sqlite3.Connection, rows: Iterable[Mapping]) -> int:
    """Insert or replace annotation rows (reflections to review); returns the count.

    Each row needs ANNOTATION_FIELDS; optional ``judge_verdict``/``judge_scores``.
    """
    rows = list(rows)
    for i, r in enumerate(rows):
        missing = [f for f in ANNOTATION_FIELDS if f not in r]
        if missing:
            raise PipelineError(f"annotation #{i} ({r.get('id', '?')}): missing field '{missing[0]}'")
    with conn:
        conn.executemany(
            "INSERT OR REPLACE INTO annotations VALUES (?,?,?,?,?,?,?,?,?,?)",
            [(r["id"], r["doc_id"], r["candidate"], int(r["prompt_version"]), r["split"], int(r["safety_score"]),
              r["document"], r["reflection"], r.get("judge_verdict"),
              json.dumps(r["judge_scores"], sort_keys=True) if r.get("judge_scores") is not None else None)
             for r in rows])
    return len(rows)


def _annotation(row: sqlite3.Row) -> dict:
    d = dict(row)
    d["judge_scores"] = json.loads(d["judge_scores"]) if d["judge_scores"] else None
    return d


def annotations(conn: sqlite3.Connection, split: str | None = None) -> list[dict]:
    """All annotations (optionally one split), ordered by id."""
    q, args = "SELECT * FROM annotations", ()
    if split is not None:
        q, args = q + " WHERE split = ?", (split,)
    return [_annotation(r) for r in conn.execute(q + " ORDER BY id", args)]


def get_annotation(conn: sqlite3.Connection, annotation_id: str) -> dict | None:
    row = conn.execute("SELECT * FROM annotations WHERE id = ?", (annotation_id,)).fetchone()
    return _annotation(row) if row else None


# -------------------------------------------------------------- validation

def _text(rec: Mapping, key: str, where: str, empty_ok: bool = False) -> str:
    v = rec.get(key)
    if not isinstance(v, str) or (not empty_ok and not v.strip()):
        raise PipelineError(f"{where}: '{key}' must be a non-empty string, got {v!r}")
    return v


def _timestamp(rec: Mapping, where: str) -> str:
    v = _text(rec, "created_at", where)
    try:
        datetime.fromisoformat(v)
    except ValueError:
        raise PipelineError(f"{where}: created_at {v!r} is not an ISO-8601 timestamp") from None
    return v


def validate_review(rec: Mapping, where: str) -> dict:
    """A clean review dict, or a one-line PipelineError naming `where` and the field."""
    extra = sorted(set(rec) - set(REVIEW_FIELDS))
    if extra:
        raise PipelineError(f"{where}: unknown field '{extra[0]}' in review")
    verdict = rec.get("verdict")
    if verdict not in VERDICTS:
        raise PipelineError(f"{where}: verdict must be accept or reject, got {verdict!r}")
    return {"kind": "review", "id": _text(rec, "id", where), "annotation_id": _text(rec, "annotation_id", where),
            "reviewer": _reviewer(rec, where), "scores": validate_scores(rec.get("scores"), where),
            "verdict": verdict, "notes": _text(rec, "notes", where, empty_ok=True),
            "created_at": _timestamp(rec, where)}


def validate_comment(rec: Mapping, where: str) -> dict:
    """A clean comment dict (verdict may be null: a remark without a verdict)."""
    extra = sorted(set(rec) - set(COMMENT_FIELDS))
    if extra:
        raise PipelineError(f"{where}: unknown field '{extra[0]}' in comment")
    verdict = rec.get("verdict")
    if verdict is not None and verdict not in VERDICTS:
        raise PipelineError(f"{where}: comment verdict must be accept, reject or null, got {verdict!r}")
    return {"kind": "comment", "id": _text(rec, "id", where), "review_id": _text(rec, "review_id", where),
            "reviewer": _reviewer(rec, where), "verdict": verdict,
            "body": _text(rec, "body", where, empty_ok=True), "created_at": _timestamp(rec, where)}


def validate_records(records: Iterable[tuple[str, Mapping]], known_annotations: set[str] | None = None,
                     existing_reviews: Mapping[str, tuple[str, str]] | None = None,
                     existing_comments: set[str] | None = None) -> tuple[list[dict], list[dict]]:
    """Validate (where, record) pairs as a whole; returns (reviews, comments).

    Rejects: bad fields (score outside 1-5, missing voice, empty reviewer, ...), duplicate
    ids or a second review of one annotation by the same reviewer (in the batch or
    already stored), reviews of unknown annotations (when `known_annotations` is given),
    comments on unknown reviews.
    """
    existing_reviews = dict(existing_reviews or {})   # review id -> (annotation_id, reviewer)
    seen_comments = set(existing_comments or ())
    pairs = {(a, _canonical_or_raw(r)): k for k, (a, r) in existing_reviews.items()}  # a store from before
    revs, coms, comment_at = [], [], []
    for where, rec in records:
        kind = rec.get("kind") if isinstance(rec, Mapping) else None
        if kind == "review":
            r = validate_review(rec, where)
            if r["id"] in existing_reviews:
                raise PipelineError(f"{where}: duplicate review id '{r['id']}'")
            pair = (r["annotation_id"], r["reviewer"])
            if pair in pairs:
                raise PipelineError(f"{where}: duplicate review: '{r['reviewer']}' already reviewed "
                                    f"'{r['annotation_id']}' (review '{pairs[pair]}'; names are compared trimmed "
                                    "and case-folded, as the review app does)")
            if known_annotations is not None and r["annotation_id"] not in known_annotations:
                raise PipelineError(f"{where}: review '{r['id']}' is of unknown annotation '{r['annotation_id']}'")
            existing_reviews[r["id"]], pairs[pair] = pair, r["id"]
            revs.append(r)
        elif kind == "comment":
            c = validate_comment(rec, where)
            if c["id"] in seen_comments:
                raise PipelineError(f"{where}: duplicate comment id '{c['id']}'")
            seen_comments.add(c["id"])
            coms.append(c)
            comment_at.append(where)
        else:
            raise PipelineError(f"{where}: 'kind' must be review or comment, got {kind!r}")
    for where, c in zip(comment_at, coms):  # after the loop: a comment may precede its review in a file
        if c["review_id"] not in existing_reviews:
            raise PipelineError(f"{where}: comment '{c['id']}' is on review '{c['review_id']}', which is neither "
                                "in this file nor in the store; fix review_id or add that review")
    return revs, coms


def read_records(path: str | Path) -> list[tuple[str, dict]]:
    """(where, record) pairs of a review/comment JSONL file, `where` = 'file:line'."""
    p = Path(path)
    if not p.is_file():
        raise PipelineError(f"{p}: review records file not found")
    check_head(p)
    return [(f"{p}:{ln}", rec) for ln, rec in iter_jsonl(p)]


# --------------------------------------------------------------- writing

def _existing(conn: sqlite3.Connection) -> tuple[set[str], dict[str, tuple[str, str]], set[str]]:
    anns = {r[0] for r in conn.execute("SELECT id FROM annotations")}
    revs = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT id, annotation_id, reviewer FROM reviews")}
    coms = {r[0] for r in conn.execute("SELECT id FROM review_comments")}
    return anns, revs, coms


def _insert(conn: sqlite3.Connection, revs: list[dict], coms: list[dict]) -> None:
    with conn:  # one transaction: all or nothing
        conn.executemany("INSERT INTO reviews VALUES (?,?,?,?,?,?,?)",
                         [(r["id"], r["annotation_id"], r["reviewer"], json.dumps(r["scores"], sort_keys=True),
                           r["verdict"], r["notes"], r["created_at"]) for r in revs])
        conn.executemany("INSERT INTO review_comments VALUES (?,?,?,?,?,?)",
                         [(c["id"], c["review_id"], c["reviewer"], c["verdict"], c["body"], c["created_at"])
                          for c in coms])


def add_records(conn: sqlite3.Connection, records: Iterable[tuple[str, Mapping]]) -> tuple[int, int]:
    """Validate then insert (where, record) pairs in one transaction; (n_reviews, n_comments)."""
    anns, revs_db, coms_db = _existing(conn)
    revs, coms = validate_records(records, anns, revs_db, coms_db)
    _insert(conn, revs, coms)
    return len(revs), len(coms)


def import_jsonl(conn: sqlite3.Connection, path: str | Path) -> tuple[int, int]:
    """Import a review/comment JSONL file: everything validated first, nothing written on error."""
    return add_records(conn, read_records(path))


def add_review(conn: sqlite3.Connection, review: Mapping) -> dict:
    """Validate and store one review (for the review UI); returns the stored record."""
    rec = {"kind": "review", **review}
    add_records(conn, [(f"review '{review.get('id', '?')}'", rec)])
    return validate_review(rec, "review")


def add_comment(conn: sqlite3.Connection, comment: Mapping) -> dict:
    """Validate and store one comment on a review's thread; returns the stored record."""
    rec = {"kind": "comment", **comment}
    add_records(conn, [(f"comment '{comment.get('id', '?')}'", rec)])
    return validate_comment(rec, "comment")


# --------------------------------------------------------------- reading

def reviews(conn: sqlite3.Connection, annotation_id: str | None = None) -> list[dict]:
    """Reviews as records (scores decoded), ordered by created_at then id."""
    q, args = "SELECT * FROM reviews", ()
    if annotation_id is not None:
        q, args = q + " WHERE annotation_id = ?", (annotation_id,)
    out = []
    for r in conn.execute(q + " ORDER BY created_at, id", args):
        d = dict(r)
        d["scores"] = json.loads(d["scores"])
        out.append({"kind": "review", **d})
    return out


def comments(conn: sqlite3.Connection, review_id: str | None = None) -> list[dict]:
    """Comments as records, ordered by created_at then id (a review's thread in order)."""
    q, args = "SELECT * FROM review_comments", ()
    if review_id is not None:
        q, args = q + " WHERE review_id = ?", (review_id,)
    return [{"kind": "comment", **dict(r)} for r in conn.execute(q + " ORDER BY created_at, id", args)]


def export_records(conn: sqlite3.Connection) -> list[dict]:
    """All reviews then all comments, in a stable order (the export's content)."""
    key = lambda r: (r["created_at"], r["id"])  # noqa: E731
    return sorted(reviews(conn), key=key) + sorted(comments(conn), key=key)


def export_jsonl(conn: sqlite3.Connection, path: str | Path) -> int:
    """Write the export file atomically (the tracked file judge_agreement depends on)."""
    rows = export_records(conn)
    write_jsonl(path, rows)
    return len(rows)


# ------------------------------------------------------ the reference rule

def effective_verdict(review: Mapping, thread: Iterable[Mapping]) -> str:
    """The review's verdict unless its thread says otherwise: the latest comment (by
    created_at, then id) that carries a verdict is the thread's verdict and wins."""
    with_verdict = sorted((c for c in thread if c.get("verdict")), key=lambda c: (c["created_at"], c["id"]))
    return with_verdict[-1]["verdict"] if with_verdict else review["verdict"]


def reference_verdicts(review_rows: Iterable[Mapping], comment_rows: Iterable[Mapping]) -> dict[str, str]:
    """Reference verdict per annotation id: each review's effective verdict (thread
    overrides review), then the majority over an annotation's reviews; a tie is reject."""
    threads: dict[str, list[Mapping]] = defaultdict(list)
    for c in comment_rows:
        threads[c["review_id"]].append(c)
    votes: dict[str, Counter] = defaultdict(Counter)
    for r in review_rows:
        votes[r["annotation_id"]][effective_verdict(r, threads.get(r["id"], []))] += 1
    return {a: ("accept" if v["accept"] > v["reject"] else "reject") for a, v in sorted(votes.items())}


# ------------------------------------------------------- judge correlations

def record_correlations(conn: sqlite3.Connection, rows: Iterable[Mapping]) -> int:
    """Append judge-vs-human agreement rows (judge, prompt_version, repeat, n, kappa,
    concordance, created_at) in one transaction."""
    rows = list(rows)
    with conn:
        conn.executemany("INSERT INTO judge_correlations (judge, prompt_version, repeat, n, kappa, concordance, "
                         "created_at) VALUES (?,?,?,?,?,?,?)",
                         [(r["judge"], str(r["prompt_version"]), int(r["repeat"]), int(r["n"]), r["kappa"],
                           float(r["concordance"]), r["created_at"]) for r in rows])
    return len(rows)


def correlations(conn: sqlite3.Connection) -> list[dict]:
    return [dict(r) for r in conn.execute("SELECT * FROM judge_correlations ORDER BY id")]
