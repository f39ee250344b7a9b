"""Sign-in, sign-out and the check every page makes that its session is still live.

Why: a sign-in costs scrypt work and guards the reviews the judge is measured against, so it
is throttled per reviewer name and per client address (throttle.py: the lock-out is checked
before the secret is hashed, and a throttled try is answered 429 with Retry-After and no hashing);
a session is a row in the store (accounts.py) so that sign-out, `add-reviewer --reset` and
`remove-reviewer` take it back at once, wherever its cookie was copied to.
"""
from __future__ import annotations

from flask import Flask, current_app, redirect, render_template, request, session, url_for

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.review_ui import accounts, queries, security
from decision_pipeline.review_ui.context import db
from decision_pipeline.review_ui.throttle import SignInThrottle, ThrottleRules

WRONG_SECRET = ("Unknown reviewer or wrong secret (ask for an account: "
                "python -m decision_pipeline review-ui add-reviewer NAME)")


def install(app: Flask, rules: ThrottleRules) -> None:
    """Add /login, /logout, the sign-in throttle and the per-request session check to `app`."""
    app.extensions["signin_throttle"] = SignInThrottle(rules)
    app.config.update(SIGNIN_MAX_FAILURES=rules.max_failures, SIGNIN_WINDOW_S=rules.window_s,
                      SIGNIN_LOCKOUT_S=rules.lockout_s, SIGNIN_MAX_TRACKED=rules.max_tracked,
                      SIGNIN_MAX_HASHING=rules.max_hashing, SIGNIN_HASH_WAIT_S=rules.hash_wait_s)
    app.before_request(check_session)
    app.add_url_rule("/login", "login", login, methods=["GET", "POST"])
    app.add_url_rule("/logout", "logout", logout, methods=["POST"])


def check_session() -> None:
    """Forget a signed-in cookie whose server-side session was revoked or has expired."""
    if request.endpoint == "static" or "reviewer" not in session:
        return None
    if accounts.session_reviewer(db(), session.get("sid")) != session["reviewer"]:
        session.clear()
    return None


def _throttled(wait: int, name: str, busy: bool = False):
    """429 with Retry-After: a locked name or address, or (busy) every hashing slot taken."""
    rules: ThrottleRules = current_app.extensions["signin_throttle"].rules
    error = ("Sign-in is busy (several sign-ins at once); try again in a second." if busy else
             f"Too many sign-in attempts for this name or from this address: try again in {wait} s "
             f"(after {rules.max_failures} wrong secrets in {rules.window_s:g} s, sign-in pauses for "
             f"{rules.lockout_s:g} s).")
    return render_template("login.html", error=error, name=name), 429, {"Retry-After": str(wait)}


def login():
    """The sign-in form; a right name + secret opens a new server-side session."""
    if request.method != "POST":
        return render_template("login.html", error=None, name="")
    name = request.form.get("name", "")
    throttle: SignInThrottle = current_app.extensions["signin_throttle"]
    addr_key = f"addr:{request.remote_addr or '?'}"
    try:
        canonical = queries.clean_reviewer(name)
    except PipelineError as e:                 # no hashing for a malformed name: only a lock-out answers first
        wait = throttle.retry_after([addr_key])
        return _throttled(wait, name) if wait else (render_template("login.html", error=str(e), name=name), 400)
    name_key = f"name:{canonical}"
    wait = throttle.retry_after([name_key, addr_key])       # checked before the scrypt work, not after
    if wait is not None:
        return _throttled(wait, name)
    with throttle.hashing_slot() as slot:
        if not slot:                                         # MAX_HASHING hashes running already: do not pile on
            return _throttled(1, name, busy=True)
        ok = security.secret_matches(queries.secret_hash(db(), canonical), request.form.get("secret", ""))
    if not ok:
        throttle.failed([name_key, addr_key])
        return render_template("login.html", error=WRONG_SECRET, name=name), 400
    throttle.succeeded(name_key)
    accounts.end_session(db(), session.get("sid"))           # signing in again ends the old session
    session.clear()                                          # a new session on sign-in: nothing carries over
    session.permanent = True
    session["reviewer"] = canonical
    session["sid"] = accounts.open_session(db(), canonical, current_app.permanent_session_lifetime.total_seconds())
    security.csrf_token(session)
    return redirect(security.safe_redirect_target(request.args.get("next"), url_for("queue_view")))


def logout():
    """Sign out: the session row is deleted, so a copy of this cookie no longer signs anyone in."""
    accounts.end_session(db(), session.get("sid"))
    session.clear()
    return redirect(url_for("login"))
