"""Review UI fixtures: a review store with a dozen reflections, the app over it, and a
signed-in test client per reviewer (the shared builders are plain functions in tests.review_ui.review_helpers)."""
from __future__ import annotations

import os
import shutil

import pytest
from flask.testing import FlaskClient

from decision_pipeline.charter import store
from decision_pipeline.review_ui.app import UIConfig, create_app
from tests.review_ui.review_helpers import CHARTER, SECRETS, add_accounts, csrf, login, make_annotations


@pytest.fixture(scope="session")
def store_template(tmp_path_factory) -> str:
    """The store every test starts from, built once: a dozen reflections and the accounts ada, ben, chen, dara
    (each account costs an scrypt hash, ~0.16 s of CPU; the tests get a byte copy, not a shared file)."""
    path = str(tmp_path_factory.mktemp("store_template") / "store.sqlite")
    conn = store.open_store(path)
    store.add_annotations(conn, make_annotations())
    conn.close()
    add_accounts(path, "ada", "ben", "chen", "dara")
    return path


@pytest.fixture()
def store_path(tmp_path, store_template) -> str:
    """This test's own store: a copy of the template file (every connection to it is closed), with its secrets."""
    path = str(tmp_path / "store.sqlite")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(store_template + suffix):
            shutil.copyfile(store_template + suffix, path + suffix)
    SECRETS[path] = dict(SECRETS[store_template])
    return path


class FormClient(FlaskClient):
    """A browser-like test client: every form POST carries the session's CSRF token, as the pages'
    hidden field does (tests of the CSRF check itself use Flask's plain client)."""

    def post(self, *args, **kwargs):
        data = kwargs.get("data")
        if isinstance(data, dict) and "csrf_token" not in data:
            kwargs["data"] = {**data, "csrf_token": csrf(self)}
        elif data is None and "json" not in kwargs:
            kwargs["data"] = {"csrf_token": csrf(self)}
        return super().post(*args, **kwargs)


@pytest.fixture()
def app(store_path):
    app = create_app(UIConfig(store_path=store_path, charter_path=CHARTER, secret_key="test"))
    app.config.update(TESTING=True)
    app.test_client_class = FormClient
    return app


@pytest.fixture()
def ada(app):
    c = app.test_client()
    login(c, "ada")
    return c


@pytest.fixture()
def ben(app):
    c = app.test_client()
    login(c, "ben")
    return c
