"""The review web app (Flask, server-rendered, plain forms).

Why: the judge is calibrated against human reviews, and reviewers need one place to
read a document beside its reflection (citations expanded), score it on the shared
rubric, and argue about each other's verdicts; everything they write goes straight
into the pipeline's review store, whose export `judge_agreement` reads.

Identity: a reviewer account made by `python -m decision_pipeline review-ui add-reviewer NAME`
(a one-time secret is printed; the store keeps its scrypt hash); sign-in is throttled and each
session is a row in the store that sign-out revokes (review_ui/auth.py); the names are what the
export records. Forms carry a CSRF token, redirects stay on the site and pages forbid framing and
inline script (review_ui/security.py). Rules enforced here, each with a message on the page and
nothing written: a score outside 1-5, a missing voice, a second review of one reflection by one
reviewer, editing someone else's review, an edit without the version it started from (409).
"""
from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from datetime import timedelta
from functools import wraps

from flask import Flask, abort, current_app, flash, jsonify, redirect, render_template, request, session, url_for

from decision_pipeline.charter import store
from decision_pipeline.charter.charter import Charter, load_charter
from decision_pipeline.charter.rubric import (DIMENSION_DOCS, DIMENSIONS, VERDICTS, VOICE_LABELS, VOICES,
                                              verdict_rule)
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.review_ui import auth, queries, security
from decision_pipeline.review_ui.context import close_db, db
from decision_pipeline.review_ui.render import voice_views
from decision_pipeline.review_ui.throttle import ThrottleRules


QUEUE_SHOWN = 50        # queue rows listed on the page (the count covers all)
SESSION_HOURS = 12      # a sign-in lasts a working day (cookie and server-side session alike)


@dataclass(frozen=True)
class UIConfig:
    """Where the app reads and writes (see cli.py for the environment variables)."""
    store_path: str
    charter_path: str
    secret_key: str
    trusted_hosts: tuple[str, ...] = ()   # Host headers served (the bound host:port); () = any (tests)
    throttle: ThrottleRules = ThrottleRules()   # sign-in tries per name / address and the lock-out


def _refuse_foreign_posts():
    """Every POST carries this session's CSRF token and no foreign Origin/Referer (400 otherwise)."""
    if request.method != "POST":
        return None
    allowed = {request.host, *(current_app.config.get("TRUSTED_HOSTS") or ())}
    problem = security.post_problem(request, session, allowed)
    if problem:
        from werkzeug.exceptions import BadRequest
        return render_template("error.html", error=BadRequest(problem)), 400
    return None


def _security_headers(response):
    for name, value in security.HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def create_app(cfg: UIConfig) -> Flask:
    """The app over the store at cfg.store_path (created if absent) and the charter file."""
    charter = load_charter(cfg.charter_path)
    conn = store.open_store(cfg.store_path)      # creates / checks the schema once, up front
    queries.ensure_ui_tables(conn)
    conn.close()
    app = Flask(__name__)
    app.config.update(SECRET_KEY=cfg.secret_key, SESSION_COOKIE_SAMESITE="Strict", SESSION_COOKIE_HTTPONLY=True,
                      STORE_PATH=cfg.store_path, MAX_CONTENT_LENGTH=256 * 1024,
                      PERMANENT_SESSION_LIFETIME=timedelta(hours=SESSION_HOURS))
    if cfg.trusted_hosts:  # a DNS-rebinding page resolves its own name to 127.0.0.1: its Host is refused
        app.config["TRUSTED_HOSTS"] = list(cfg.trusted_hosts)
    app.extensions["charter"] = charter
    app.teardown_appcontext(close_db)
    app.before_request(_refuse_foreign_posts)
    auth.install(app, cfg.throttle)
    app.after_request(_security_headers)
    app.context_processor(lambda: {"me": session.get("reviewer"), "VOICES": VOICES, "DIMENSIONS": DIMENSIONS,
                                   "csrf_token": lambda: security.csrf_token(session),
                                   "review_version": queries.review_version,
                                   "VOICE_LABELS": VOICE_LABELS, "DIMENSION_DOCS": DIMENSION_DOCS,
                                   "VERDICTS": VERDICTS, "score_field": queries.score_field,
                                   "my_progress": _my_progress})
    _routes(app)
    return app


def _my_progress() -> dict | None:
    me = session.get("reviewer")
    return queries.reviewer_progress(db(), me) if me else None


def login_required(view):
    @wraps(view)
    def wrapped(*args, **kwargs):
        if not session.get("reviewer"):
            if request.method == "POST":
                abort(401, "Sign in with your reviewer name first")
            return redirect(url_for("login", next=request.full_path))
        return view(*args, **kwargs)
    return wrapped


def _annotation(annotation_id: str) -> dict:
    """The stored annotation with its public key (404 when absent)."""
    ann = store.get_annotation(db(), annotation_id)
    if ann is None:
        abort(404, "No such reflection in the review store")
    return {**ann, "key": queries.public_id(annotation_id)}


def _by_key(key: str) -> dict:
    annotation_id = queries.find_annotation(db(), key)
    if annotation_id is None:
        abort(404, f"No reflection '{key}' in the review store")
    return _annotation(annotation_id)


def _back(ann: dict, anchor: str, **args) -> str:
    return url_for("annotation", key=ann["key"], **args) + anchor


def _threads(annotation_id: str) -> tuple[list[dict], str | None]:
    """The annotation's reviews, each with its thread and effective verdict, and the
    reference verdict (thread overrides review, then majority; None without reviews)."""
    revs = store.reviews(db(), annotation_id)
    all_comments = []
    for r in revs:
        r["thread"] = store.comments(db(), r["id"])
        r["effective"] = store.effective_verdict(r, r["thread"])
        r["rule_verdict"] = verdict_rule(r["scores"])
        all_comments += r["thread"]
    ref = store.reference_verdicts(revs, all_comments).get(annotation_id)
    return revs, ref


def _page(ann: dict, *, form: dict | None = None, errors: list[str] | None = None, action: str | None = None,
          editing: dict | None = None, status: int = 200, draft_at: str | None = None,
          comment_errors: dict | None = None, comment_form: dict | None = None):
    """Render the annotation page: document, voices, reviews with threads, and the form."""
    me = session["reviewer"]
    revs, ref = _threads(ann["id"])
    mine = next((r for r in revs if r["reviewer"] == me), None)
    # others' reviews stay hidden until you have written yours: independent judgements
    # are what kappa assumes; ?show=reviews reveals them anyway (then you review informed)
    hidden = 0 if (mine or request.args.get("show") == "reviews" or comment_errors) else len(revs)
    next_item = next((q for q in queries.queue(db(), me) if q["id"] != ann["id"]), None)
    html = render_template("annotation.html", ann=ann, voices=voice_views(ann["reflection"], app_charter()),
                           reviews=[] if hidden else revs, hidden=hidden,
                           reference=None if hidden else ref, mine=mine, form=form or {}, errors=errors or [],
                           action=action, editing=editing, draft_at=draft_at, next_item=next_item,
                           comment_errors=comment_errors or {}, comment_form=comment_form or {})
    return html, status


def app_charter() -> Charter:
    return current_app.extensions["charter"]


def _routes(app: Flask) -> None:
    @app.get("/")
    def index():
        return redirect(url_for("queue_view") if session.get("reviewer") else url_for("login"))

    @app.get("/queue")
    @login_required
    def queue_view():
        split = request.args.get("split") or None
        if split not in (None, "train", "validation"):
            split = None
        items = queries.queue(db(), session["reviewer"], split)
        by_score: dict[int, int] = {}
        for it in items:
            by_score[it["safety_score"]] = by_score.get(it["safety_score"], 0) + 1
        return render_template("queue.html", items=items, by_score=dict(sorted(by_score.items())), split=split,
                               limit=QUEUE_SHOWN, everyone=queries.progress(db()))

    @app.get("/a/<key>")
    @login_required
    def annotation(key: str):
        ann = _by_key(key)
        draft = queries.load_draft(db(), ann["id"], session["reviewer"])
        return _page(ann, form=draft["fields"] if draft else {}, draft_at=draft["updated_at"] if draft else None)

    @app.post("/a/<key>/review")
    @login_required
    def submit_review(key: str):
        ann = _by_key(key)
        annotation_id, me = ann["id"], session["reviewer"]
        fields, errors = queries.review_from_form(request.form)
        existing = queries.my_review(db(), annotation_id, me)
        if existing:
            return _page(ann, form=request.form, status=409, errors=[
                "Duplicate submission: you already reviewed this reflection; nothing was written. "
                "Use 'Edit my review' to change it."])
        if errors:
            return _page(ann, form=request.form, errors=errors, status=400)
        rec = {"id": queries.review_id(annotation_id, me), "annotation_id": annotation_id, "reviewer": me,
               "created_at": queries.now(), **fields}
        try:
            store.add_review(db(), rec)
        except (PipelineError, sqlite3.IntegrityError) as e:
            dup = isinstance(e, sqlite3.IntegrityError) or "duplicate" in str(e)
            msg = ("Duplicate submission: you already reviewed this reflection; nothing was written."
                   if dup else str(e))
            return _page(ann, form=request.form, errors=[msg], status=409 if dup else 400)
        queries.delete_draft(db(), annotation_id, me)
        flash("Review saved.")
        return redirect(_back(ann, "#reviews"))

    @app.post("/a/<key>/draft")
    @login_required
    def save_draft(key: str):
        ann = _by_key(key)
        annotation_id, me = ann["id"], session["reviewer"]
        autosave = bool(request.headers.get("X-Draft-Autosave"))
        if not queries.save_draft(db(), annotation_id, me, request.form):   # already submitted
            if autosave:
                return jsonify(error="already reviewed; draft not kept"), 409
            flash("You already reviewed this reflection; no draft kept.")
            return redirect(_back(ann, "#rubric"))
        saved = queries.load_draft(db(), annotation_id, me)
        if autosave:
            return jsonify(saved_at=saved["updated_at"])
        flash("Draft saved; it stays here until you submit.")
        return redirect(_back(ann, "#rubric"))

    def _own_review(review_id: str) -> tuple[dict, dict, list[str]]:
        rev = queries.get_review(db(), review_id)
        if rev is None:
            abort(404, f"No review with id '{review_id}'")
        ann = _annotation(rev["annotation_id"])
        errors = []
        if rev["reviewer"] != session["reviewer"]:
            errors.append(f"This review is by {rev['reviewer']}; you ({session['reviewer']}) can comment on it "
                          "but not edit it. Nothing was written.")
        return rev, ann, errors

    @app.get("/r/<review_id>/edit")
    @login_required
    def edit_review(review_id: str):
        rev, ann, errors = _own_review(review_id)
        if errors:
            return _page(ann, errors=errors, status=403)
        return _page(ann, form=queries.form_from_review(rev), editing=rev,
                     action=url_for("edit_review_post", review_id=review_id))

    @app.post("/r/<review_id>/edit")
    @login_required
    def edit_review_post(review_id: str):
        rev, ann, errors = _own_review(review_id)
        if errors:
            return _page(ann, errors=errors, status=403)
        action = url_for("edit_review_post", review_id=review_id)
        if not request.form.get("version"):      # not from the edit page: never overwrite blindly
            e = queries.StaleEdit(rev, missing=True)
            return _page(ann, form=queries.form_from_review(rev), errors=[str(e)], editing=rev, action=action,
                         status=409)
        fields, errors = queries.review_from_form(request.form)
        if errors:
            return _page(ann, form=request.form, errors=errors, editing=rev, action=action, status=400)
        try:
            queries.update_review(db(), review_id, session["reviewer"], fields, request.form.get("version"))
        except queries.StaleEdit as e:
            newer = {**rev, **e.newer}
            return _page(ann, form=queries.form_from_review(newer), errors=[str(e)], editing=newer, action=action,
                         status=409)
        except PipelineError as e:
            return _page(ann, form=request.form, errors=[str(e)], editing=rev, action=action, status=403)
        flash("Review updated.")
        return redirect(_back(ann, "#reviews"))

    @app.post("/r/<review_id>/comment")
    @login_required
    def comment(review_id: str):
        rev = queries.get_review(db(), review_id)
        if rev is None:
            abort(404, f"No review with id '{review_id}'")
        ann = _annotation(rev["annotation_id"])
        body = (request.form.get("body") or "").strip()
        verdict = request.form.get("verdict") or None
        errors = []
        if not body:
            errors.append("Write a comment (the thread needs a reason, not only a verdict).")
        if len(body) > queries.MAX_NOTES:
            errors.append(f"Comment is {len(body)} characters; keep it under {queries.MAX_NOTES}.")
        if verdict is not None and verdict not in VERDICTS:
            errors.append(f"unknown verdict '{verdict[:20]}': choose accept, reject or no verdict")
        if errors:
            return _page(ann, comment_errors={review_id: errors}, comment_form={review_id: request.form},
                         status=400)
        created = queries.now()
        store.add_comment(db(), {"id": queries.comment_id(review_id, session["reviewer"], created),
                                 "review_id": review_id, "reviewer": session["reviewer"], "verdict": verdict,
                                 "body": body, "created_at": created})
        flash("Comment added.")
        # show=reviews: a commenter who has not reviewed this reflection still sees the thread
        return redirect(_back(ann, f"#thread-{review_id}", show="reviews"))

    @app.errorhandler(401)
    @app.errorhandler(403)
    @app.errorhandler(404)
    def http_error(e):
        return render_template("error.html", error=e), e.code


def config_from_env(env: dict | None = None) -> UIConfig:
    """UIConfig from REVIEW_STORE, REVIEW_CHARTER and REVIEW_UI_SECRET (see cli.py)."""
    env = os.environ if env is None else env
    return UIConfig(store_path=env.get("REVIEW_STORE", "reviews/store.sqlite"),
                    charter_path=env.get("REVIEW_CHARTER", "configs/charter/charter.md"),
                    secret_key=env.get("REVIEW_UI_SECRET") or os.urandom(24).hex())
