"""The request's store connection, shared by the app's views and the sign-in module.

Why a module of its own: app.py and auth.py both need it, and auth.py must not import app.py
(app.py installs auth's routes).
"""
from __future__ import annotations

import sqlite3

from flask import current_app, g

from decision_pipeline.charter import store


def db() -> sqlite3.Connection:
    """This request's connection (WAL, busy timeout 30 s), opened on first use."""
    if "db" not in g:
        g.db = store.open_store(current_app.config["STORE_PATH"])
    return g.db


def close_db(_exc: BaseException | None) -> None:
    """Teardown: close the request's connection, if one was opened."""
    conn = g.pop("db", None)
    if conn is not None:
        conn.close()
