"""Review UI fixtures: a review store with a dozen reflections, the app over it, and a
signed-in test client per reviewer. Also makes ``review_helpers`` importable (the
project runs pytest with --import-mode=importlib, which keeps test folders off sys.path)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.append(_HERE)

from review_helpers import CHARTER, login, make_annotations  # noqa: E402

from decision_pipeline.charter import store  # noqa: E402
from decision_pipeline.review_ui.app import UIConfig, create_app  # noqa: E402


@pytest.fixture()
def store_path(tmp_path) -> str:
    path = str(tmp_path / "store.sqlite")
    conn = store.open_store(path)
    store.add_annotations(conn, make_annotations())
    conn.close()
    return path


@pytest.fixture()
def app(store_path):
    app = create_app(UIConfig(store_path=store_path, charter_path=CHARTER, secret_key="test"))
    app.config.update(TESTING=True)
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
