"""Review UI fixtures: a review store with a dozen reflections, the app over it, and a
signed-in test client per reviewer (the shared builders are plain functions in tests.review_ui.review_helpers)."""
from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from decision_pipeline.charter import store
from decision_pipeline.review_ui.app import UIConfig, create_app
from tests.review_ui.review_helpers import CHARTER, add_accounts, csrf, login, make_annotations


@pytest.fixture()
def store_path(tmp_path) -> str:
    path = str(tmp_path / "store.sqlite")
    conn = store.open_store(path)
    store.add_annotations(conn, make_annotations())
    conn.close()
    add_accounts(path, "ada", "ben", "chen", "dara")
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
