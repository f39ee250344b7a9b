"""`python -m decision_pipeline review-ui [serve|export|sync|add-reviewer [--reset] NAME|remove-reviewer NAME]`
— the review web app.

add-reviewer NAME: make a reviewer account in the live store and print its one-time sign-in
  secret (the store keeps only its scrypt hash); names are case-folded, [a-z0-9_-], 1-40.
add-reviewer --reset NAME: a new secret for an existing reviewer (printed once); the old one
  stops working and every browser signed in as them is signed out.
remove-reviewer NAME: delete the account, sign them out everywhere and drop their unsent drafts;
  their reviews and comments stay in the store and in the export (re-adding the name gives the
  person a new secret and the same reviews).

serve (default; `make review-ui`): copy the pipeline's reflections into the live review
  store, then serve the app with waitress on REVIEW_UI_HOST:REVIEW_UI_PORT.
export (`make review-export`): write the live store's reviews and comments to the
  git-tracked JSONL the pipeline imports (params.yaml reviews.import_path).
sync: only the copy of reflections (annotations) into the live store.

Environment (defaults in brackets):
  REVIEW_UI_PORT [8765], REVIEW_UI_HOST [127.0.0.1: this machine only; 0.0.0.0 opens it to the network]
  REVIEW_UI_ALLOWED_HOSTS [loopback bind: localhost, 127.0.0.1, ::1; network bind: this machine's names and
    addresses]: the Host names the app answers to, comma-separated (`.lab.example` also serves its
    subdomains, `*` any); any other Host gets 400 (review_ui/network.py)
  REVIEW_STORE [reviews/store.sqlite]: the live store (git-ignored; back it up)
  REVIEW_ANNOTATIONS [data/reviews/store.sqlite]: the pipeline's store (`reviews` stage) to copy reflections from
  REVIEW_CHARTER [configs/charter/charter.md], REVIEW_UI_SECRET [random per start: restarting signs everyone out]
"""
from __future__ import annotations

import argparse
from dataclasses import replace
import os
import socket
import sqlite3
import sys
from pathlib import Path

from decision_pipeline.charter import store
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.yamlio import load_yaml
from decision_pipeline.review_ui import accounts, network, queries
from decision_pipeline.review_ui.app import config_from_env, create_app

DEFAULT_EXPORT = "reviews/export.jsonl"


def export_path(params: str = "params.yaml") -> str:
    """reviews.import_path from params.yaml: the file the `reviews` stage imports."""
    p = Path(params)
    if p.is_file():
        section = (load_yaml(p.read_text(encoding="utf-8"), str(p)) or {}).get("reviews") or {}
        if section.get("import_path"):
            return str(section["import_path"])
    return DEFAULT_EXPORT


def _copy_annotations(live: str, rows: list) -> int:
    """Insert or replace the pipeline's annotations in the live store (its reviews and comments,
    seeded ones included, are not copied)."""
    dst = store.open_store(live)
    try:
        return store.add_annotations(dst, rows)
    finally:
        dst.close()


def pipeline_annotations(source: str) -> list:
    """The annotations of the pipeline's store ([] when it is absent), read before the live store is touched.

    The source is a DVC output (maybe a link into the cache): it is opened immutable,
    so nothing, not even a -wal/-shm file, is written next to it.
    """
    if not Path(source).is_file():
        return []
    src = sqlite3.connect(f"{Path(source).resolve().as_uri()}?immutable=1", uri=True)
    src.row_factory = sqlite3.Row
    try:
        rows = store.annotations(src)
    except sqlite3.DatabaseError as exc:  # not SQLite, or a store without the annotations table
        raise PipelineError(f"{source}: not the pipeline's review store ({exc}); set REVIEW_ANNOTATIONS to "
                            "data/reviews/store.sqlite (built by `dvc repro pipelines/charter/dvc.yaml:reviews`)") from None
    finally:
        src.close()
    return rows


def _accounts_command(store_path: str, command: str, raw_name: str | None, reset: bool) -> int:
    """add-reviewer [--reset] / remove-reviewer on the live store; prints what was done."""
    if not raw_name:
        raise PipelineError(f"{command} needs a NAME: python -m decision_pipeline review-ui {command} ada")
    if command == "remove-reviewer" and not Path(store_path).is_file():
        raise PipelineError(f"{store_path}: no review store, so no reviewer to remove")
    conn = store.open_store(store_path)
    try:
        queries.ensure_ui_tables(conn)
        if command == "remove-reviewer":
            name, n = queries.clean_reviewer(raw_name), accounts.remove_reviewer(conn, raw_name)
            print(f"reviewer '{name}' removed from {store_path}: {n['sessions']} session(s) signed out, "
                  f"{n['drafts']} draft(s) dropped; their {n['reviews']} review(s) and {n['comments']} "
                  "comment(s) are kept (and exported)")
            return 0
        if reset:
            name, secret, revoked = accounts.reset_reviewer(conn, raw_name)
            print(f"reviewer '{name}': new secret in {store_path}, the old one no longer works and "
                  f"{revoked} session(s) were signed out; their one-time sign-in secret (shown once, "
                  f"only its hash is kept):\n{secret}")
            return 0
        name, secret = accounts.add_reviewer(conn, raw_name)
    finally:
        conn.close()
    print(f"reviewer '{name}' added to {store_path}; their one-time sign-in secret (shown once, "
          f"only its hash is kept):\n{secret}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m decision_pipeline review-ui", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", default="serve",
                    choices=("serve", "export", "sync", "add-reviewer", "remove-reviewer"))
    ap.add_argument("name", nargs="?", help="add-reviewer, remove-reviewer: the reviewer's name (a-z, 0-9, '-', '_')")
    ap.add_argument("--reset", action="store_true",
                    help="add-reviewer: a new secret for an existing reviewer; signs them out everywhere")
    ap.add_argument("--out", help="export: output file [params.yaml reviews.import_path, else reviews/export.jsonl]")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_intermixed_args(argv)   # `add-reviewer --reset ada`: the flag may sit between the two
    cfg = config_from_env()
    source = os.environ.get("REVIEW_ANNOTATIONS", "data/reviews/store.sqlite")
    try:
        if args.reset and args.command != "add-reviewer":
            raise PipelineError(f"--reset belongs to add-reviewer, not {args.command}")
        if args.command in ("add-reviewer", "remove-reviewer"):
            return _accounts_command(cfg.store_path, args.command, args.name, args.reset)
        if args.command == "export":
            if not Path(cfg.store_path).is_file():
                raise PipelineError(f"{cfg.store_path}: no review store yet; start the UI (make review-ui) and review")
            out = args.out or export_path(args.params)
            conn = store.open_store(cfg.store_path)
            try:
                n = store.export_jsonl(conn, out)
                n_rev = len(store.reviews(conn))
            finally:
                conn.close()
            print(f"review export: {n_rev} reviews, {n - n_rev} comments -> {out}")
            return 0
        app = None
        if args.command == "serve":  # the variables and the port checked before anything is written
            host, port = network.host_from_env(os.environ), network.port_from_env(os.environ)
            allowed = network.allowed_hosts(host, os.environ)
            network.check_free(host, port)
        rows = pipeline_annotations(source)
        if args.command == "serve":  # the charter and the live store (created, or checked to be one)
            app = create_app(replace(cfg, trusted_hosts=allowed))
        n = _copy_annotations(cfg.store_path, rows) if rows else 0
        print(f"review store {cfg.store_path}: {n} reflections copied from {source}"
              if n else f"review store {cfg.store_path}: {source} not found, nothing copied "
                        "(build it with `dvc repro pipelines/charter/dvc.yaml:reviews`)", file=sys.stderr)
        if app is None:
            return 0
        from waitress import serve
        shown = host if network.is_loopback(host) or host not in ("0.0.0.0", "::") else socket.getfqdn()
        print(f"review UI on http://{f'[{shown}]' if ':' in shown else shown}:{port}/ (listening on {host}; store "
              f"{cfg.store_path}; serving Host {', '.join(allowed)}); Ctrl-C stops it", file=sys.stderr)
        try:
            serve(app, host=host, port=port, threads=8, ident="review-ui")
        except OSError as exc:  # taken between the check and the bind
            raise network.bind_error(host, port, exc) from None
        return 0
    except PipelineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:  # a page or a text of the store damaged on disk
        print(f"error: {cfg.store_path}: the review store is damaged ({' '.join(str(e).split())[:80]}); restore it "
              "from your backup (nothing was written)", file=sys.stderr)
        return 2

