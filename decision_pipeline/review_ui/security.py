"""Who may sign in, where a sign-in may send you, and what a browser may do with the pages.

Why: the judge's kappa is only as good as the honesty of the weakest reviewer, and the app
used to let anyone sign in as anyone by typing the name (a Cyrillic "а" made a look-alike,
"Ada" another reviewer), bounce a sign-in to a foreign host (`/login?next=/%09/evil.example`),
and accept a POST from any page the reviewer had open. Here:

- reviewers are created by `python -m decision_pipeline review-ui add-reviewer NAME`, which prints
  a one-time sign-in secret; the store keeps only its scrypt hash (werkzeug), never the secret;
- names are NFKC-normalised, case-folded and limited to [a-z0-9_-] (1-40): look-alikes cannot
  coexist, and "Ada" is "ada";
- redirect targets are parsed and only same-site paths are followed;
- every form carries a per-session CSRF token, and a POST whose Origin/Referer names another
  host is refused;
- pages carry a CSP without inline script, X-Frame-Options DENY, nosniff and a same-origin
  referrer policy.
"""
from __future__ import annotations

import hmac
import secrets
import unicodedata
from urllib.parse import unquote, urlsplit

from werkzeug.security import check_password_hash, generate_password_hash

from decision_pipeline.charter.store import MAX_REVIEWER_NAME, REVIEWER_NAME_RULE
from decision_pipeline.common.errors import PipelineError

MAX_NAME = MAX_REVIEWER_NAME          # one name rule with the import (charter/store.py)
NAME_RULE = REVIEWER_NAME_RULE
CSRF_FIELD = "csrf_token"
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def normalise_name(raw: object) -> str:
    """The canonical reviewer name, or a PipelineError saying what is allowed."""
    text = unicodedata.normalize("NFKC", str(raw or "")).strip().casefold()
    if not text:
        raise PipelineError("Enter your name: an empty reviewer name is not allowed")
    if len(text) > MAX_NAME:
        raise PipelineError(f"Reviewer name is {len(text)} characters; use at most {MAX_NAME}")
    if not NAME_RULE.fullmatch(text):
        raise PipelineError("Reviewer names use only a-z, 0-9, '-' and '_' (no spaces or look-alike letters)")
    return text


def new_secret() -> tuple[str, str]:
    """(the one-time sign-in secret to hand the reviewer, the hash the store keeps)."""
    secret = secrets.token_urlsafe(18)
    return secret, generate_password_hash(secret, method="scrypt")


def secret_matches(stored_hash: str | None, secret: str) -> bool:
    """Constant-time check; an unknown reviewer is checked against a dummy hash (no timing tell)."""
    if not stored_hash:
        check_password_hash(_DUMMY, secret or "")
        return False
    return check_password_hash(stored_hash, secret or "")


_DUMMY = generate_password_hash("not-a-reviewer", method="scrypt")


def safe_redirect_target(target: str | None, fallback: str) -> str:
    """`target` when it is a path on this site, else `fallback`.

    Refused: any scheme or host (`https:`, `//host`), backslashes (browsers read `/\\host` as
    `//host`), control characters and whitespace (`/%09/host`), in raw or percent-decoded form.
    """
    if not target:
        return fallback
    for form in (target, unquote(target), unquote(unquote(target))):
        if "\\" in form or any(ord(ch) < 0x21 or ord(ch) == 0x7f for ch in form):
            return fallback
        parts = urlsplit(form)
        if parts.scheme or parts.netloc or not form.startswith("/") or form.startswith("//"):
            return fallback
    return target


def csrf_token(session) -> str:
    """This session's CSRF token (made on first use); rotates with the session on sign-in."""
    if CSRF_FIELD not in session:
        session[CSRF_FIELD] = secrets.token_urlsafe(24)
    return session[CSRF_FIELD]


def post_problem(request, session, allowed_hosts: set[str]) -> str | None:
    """Why a POST is refused (None when it is fine): a foreign Origin/Referer, or a missing/wrong token."""
    for header in ("Origin", "Referer"):
        value = request.headers.get(header)
        if value and value != "null":
            host = urlsplit(value).netloc
            if host and host not in allowed_hosts:
                return f"cross-site request refused ({header}: {host})"
    sent = request.form.get(CSRF_FIELD, "") or request.headers.get("X-CSRF-Token", "")
    expected = session.get(CSRF_FIELD, "")
    if not expected or not hmac.compare_digest(str(sent), str(expected)):
        return "the form is stale or was not sent by this site; reload the page and try again"
    return None
