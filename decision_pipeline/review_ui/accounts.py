"""Reviewer accounts and their server-side sessions, in the live review store.

Why: a signed cookie alone cannot be taken back: one copied before sign-out kept opening the
queue for its whole 12 hours, and a leaked secret could not be replaced (issue #33). So every
sign-in writes a row to ``review_sessions`` (the SHA-256 of a random session id; the cookie holds
the id) and every page checks the row is still there. Sign-out deletes the row; resetting or
removing a reviewer (``add-reviewer --reset``, ``remove-reviewer``) deletes all of theirs.

Both tables belong to the app, not to the store's schema (decision_pipeline.charter.store):
they are never exported. Removing a reviewer keeps their reviews and comments (they are the
record the pipeline imports; the name is the identity there) and drops their unsent drafts.
"""
from __future__ import annotations

import hashlib
import secrets
import sqlite3
import time
from datetime import datetime, timezone

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.review_ui.security import new_secret, normalise_name

ACCOUNTS_DDL = """CREATE TABLE IF NOT EXISTS review_accounts (
    name TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 40), secret_hash TEXT NOT NULL, created_at TEXT NOT NULL)"""
SESSIONS_DDL = """CREATE TABLE IF NOT EXISTS review_sessions (
    token_hash TEXT PRIMARY KEY, reviewer TEXT NOT NULL REFERENCES review_accounts(name),
    created_at REAL NOT NULL, expires_at REAL NOT NULL)"""
SESSIONS_INDEX = "CREATE INDEX IF NOT EXISTS review_sessions_reviewer ON review_sessions(reviewer)"


def ensure_account_tables(conn: sqlite3.Connection) -> None:
    """Create the accounts and sessions tables when absent (older stores gain the sessions table)."""
    with conn:
        conn.execute(ACCOUNTS_DDL)
        conn.execute(SESSIONS_DDL)
        conn.execute(SESSIONS_INDEX)


def _stamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _exists(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM review_accounts WHERE name = ?", (name,)).fetchone() is not None


def add_reviewer(conn: sqlite3.Connection, raw_name: str) -> tuple[str, str]:
    """(name, one-time secret) of a new reviewer account; the store keeps only the secret's hash.
    A name taken (after normalisation: "Ada" is "ada") is refused."""
    name = normalise_name(raw_name)
    secret, digest = new_secret()
    with conn:
        if _exists(conn, name):
            raise PipelineError(f"reviewer '{name}' exists already; pick another name, or give them a new "
                                f"secret with: add-reviewer --reset {name}")
        conn.execute("INSERT INTO review_accounts (name, secret_hash, created_at) VALUES (?, ?, ?)",
                     (name, digest, _stamp()))
    return name, secret


def reset_reviewer(conn: sqlite3.Connection, raw_name: str) -> tuple[str, str, int]:
    """(name, new one-time secret, sessions revoked) for an existing reviewer: the old secret stops
    working and every browser signed in as them is signed out, in one transaction."""
    name = normalise_name(raw_name)
    secret, digest = new_secret()
    with conn:
        if not _exists(conn, name):
            raise PipelineError(f"no reviewer '{name}' to reset; add them with: add-reviewer {name}")
        conn.execute("UPDATE review_accounts SET secret_hash = ? WHERE name = ?", (digest, name))
        revoked = conn.execute("DELETE FROM review_sessions WHERE reviewer = ?", (name,)).rowcount
    return name, secret, revoked


def remove_reviewer(conn: sqlite3.Connection, raw_name: str) -> dict[str, int]:
    """Delete the account, its sessions and its drafts; keep its reviews and comments (exported as before).
    Returns counts: sessions revoked, drafts dropped, reviews and comments kept."""
    name = normalise_name(raw_name)
    with conn:
        if not _exists(conn, name):
            raise PipelineError(f"no reviewer '{name}' to remove")
        revoked = conn.execute("DELETE FROM review_sessions WHERE reviewer = ?", (name,)).rowcount
        drafts = conn.execute("DELETE FROM review_drafts WHERE reviewer = ?", (name,)).rowcount
        conn.execute("DELETE FROM review_accounts WHERE name = ?", (name,))
        reviews = conn.execute("SELECT count(*) FROM reviews WHERE reviewer = ?", (name,)).fetchone()[0]
        comments = conn.execute("SELECT count(*) FROM review_comments WHERE reviewer = ?", (name,)).fetchone()[0]
    return {"sessions": revoked, "drafts": drafts, "reviews": reviews, "comments": comments}


def secret_hash(conn: sqlite3.Connection, name: str) -> str | None:
    """The stored scrypt hash of `name`'s secret (None: no such reviewer)."""
    row = conn.execute("SELECT secret_hash FROM review_accounts WHERE name = ?", (name,)).fetchone()
    return row[0] if row else None


# ---------------------------------------------------------------- sessions

def _digest(token: str) -> str:
    """What the store keeps of a session id: a copy of the store does not hold live sessions."""
    return hashlib.sha256(token.encode()).hexdigest()


def open_session(conn: sqlite3.Connection, name: str, lifetime_s: float) -> str:
    """A new session id for `name` (put it in the signed cookie); expired rows are swept here."""
    token, now = secrets.token_urlsafe(32), time.time()
    with conn:
        conn.execute("DELETE FROM review_sessions WHERE expires_at <= ?", (now,))
        conn.execute("INSERT INTO review_sessions (token_hash, reviewer, created_at, expires_at) VALUES (?, ?, ?, ?)",
                     (_digest(token), name, now, now + lifetime_s))
    return token


def session_reviewer(conn: sqlite3.Connection, token: object) -> str | None:
    """The reviewer a live session id belongs to; None when it was revoked, expired or never made."""
    if not isinstance(token, str) or not token:
        return None
    row = conn.execute("SELECT reviewer FROM review_sessions WHERE token_hash = ? AND expires_at > ?",
                       (_digest(token), time.time())).fetchone()
    return row[0] if row else None


def end_session(conn: sqlite3.Connection, token: object) -> None:
    """Revoke one session (sign-out): the cookie, wherever it was copied, no longer signs anyone in."""
    if isinstance(token, str) and token:
        with conn:
            conn.execute("DELETE FROM review_sessions WHERE token_hash = ?", (_digest(token),))


def live_sessions(conn: sqlite3.Connection, name: str) -> int:
    """How many unexpired sessions `name` has (for the CLI and tests)."""
    return conn.execute("SELECT count(*) FROM review_sessions WHERE reviewer = ? AND expires_at > ?",
                        (name, time.time())).fetchone()[0]
