"""Review app security over HTTP (Flask's test client on the real app and a real SQLite store):
accounts with secrets, redirects, CSRF and Origin, trusted hosts, headers, stale edits."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from flask.testing import FlaskClient
from tests.review_ui.review_helpers import CHARTER, filled_form, login, rows, url

from decision_pipeline.review_ui import queries
from decision_pipeline.review_ui.app import UIConfig, create_app
from decision_pipeline.review_ui.security import HEADERS, safe_redirect_target

ROOT = Path(__file__).resolve().parents[2]
BYPASSES = ["//evil.example/x", "/\\evil.example", "\\\\evil.example", "/%09/evil.example/phish",
            "/%0a/evil.example", "https://evil.example/", "HTTPS:evil.example", "%2F%2Fevil.example",
            "/%2F/evil.example", "/%5Cevil.example", "/%255C%255Cevil.example", "javascript:alert(1)",
            "evil.example", " /queue", "/\t/evil.example"]


@pytest.mark.parametrize("target", BYPASSES)
def test_redirect_targets_off_the_site_fall_back(target):
    assert safe_redirect_target(target, "/queue") == "/queue"


@pytest.mark.parametrize("target", ["/queue", "/queue?split=train", "/a/x%2Fy#reviews"])
def test_redirect_targets_on_the_site_are_kept(target):
    assert safe_redirect_target(target, "/queue") == target


def test_sign_in_never_redirects_to_another_host(app):
    c = app.test_client()
    c.get("/login")
    r = c.post("/login?next=/%09/evil.example/phish", data={"name": "ada", "secret": _secret(app, "ada")})
    assert r.status_code == 302 and r.headers["Location"] == "/queue"


def _secret(app, name):
    from tests.review_ui.review_helpers import SECRETS
    return SECRETS[app.config["STORE_PATH"]][name]


def test_a_post_without_the_csrf_token_is_refused_and_writes_nothing(app, store_path):
    plain = FlaskClient(app, use_cookies=True)
    login(app.test_client(), "ada")
    plain.get("/login")
    r = plain.post("/login", data={"name": "ada", "secret": _secret(app, "ada")})
    assert r.status_code == 400 and b"not sent by this site" in r.data
    ada = app.test_client()
    login(ada, "ada")
    with ada.session_transaction() as s:
        token = s["csrf_token"]
    r = FlaskClient.post(ada, url("ref_cite_right/ann-01", "/review"), data=filled_form())  # no token
    assert r.status_code == 400 and not rows(store_path, "reviews")
    r = FlaskClient.post(ada, url("ref_cite_right/ann-01", "/review"), data={**filled_form(), "csrf_token": "x" + token})
    assert r.status_code == 400 and not rows(store_path, "reviews")


def test_a_cross_site_origin_is_refused_even_with_a_token(ada, store_path):
    r = ada.post(url("ref_cite_right/ann-01", "/review"), data=filled_form(),
                 headers={"Origin": "https://evil.example"})
    assert r.status_code == 400 and b"cross-site request refused" in r.data and not rows(store_path, "reviews")
    assert ada.post(url("ref_cite_right/ann-01", "/review"), data=filled_form(),
                    headers={"Origin": "http://localhost"}).status_code == 302


def test_sign_in_rotates_the_session_and_it_expires(app):
    c = app.test_client()
    c.get("/login")
    with c.session_transaction() as s:
        before = s["csrf_token"]
        s["planted"] = "by an attacker"
    login(c, "ada")
    with c.session_transaction() as s:
        assert s["csrf_token"] != before and "planted" not in s and s.permanent
    assert app.permanent_session_lifetime.total_seconds() == 12 * 3600


def test_only_the_bound_host_is_served(store_path):
    app = create_app(UIConfig(store_path=store_path, charter_path=CHARTER, secret_key="t",
                              trusted_hosts=("127.0.0.1:8765", "localhost:8765")))
    c = app.test_client()
    assert c.get("/login", headers={"Host": "127.0.0.1:8765"}).status_code == 200
    assert c.get("/login", headers={"Host": "rebind.evil.example:8765"}).status_code == 400


def test_pages_forbid_framing_sniffing_and_inline_script(ada):
    page = ada.get(url("ref_cite_right/ann-01"))
    for name, value in HEADERS.items():
        assert page.headers[name] == value
    assert "'unsafe-inline'" not in page.headers["Content-Security-Policy"]
    assert b"<script>" not in page.data and b"autosave.js" in page.data


def test_an_edit_from_a_stale_tab_gets_409_with_the_newer_text(ada, store_path):
    ada.post(url("ref_cite_right/ann-01", "/review"), data=filled_form(notes="first"))
    rid = queries.review_id("ref_cite_right/ann-01", "ada")
    form = ada.get(f"/r/{rid}/edit").data.decode()
    version = form.split('name="version" value="', 1)[1].split('"', 1)[0]
    first = ada.post(f"/r/{rid}/edit", data={**filled_form(notes="tab one"), "version": version})
    assert first.status_code == 302
    second = ada.post(f"/r/{rid}/edit", data={**filled_form(notes="tab two"), "version": version})
    assert second.status_code == 409 and b"changed in another tab" in second.data and b"tab one" in second.data
    assert rows(store_path, "reviews")[0]["notes"] == "tab one"


def test_add_reviewer_prints_a_secret_the_store_only_hashes(tmp_path):
    store_file = tmp_path / "live.sqlite"
    env = {**os.environ, "REVIEW_STORE": str(store_file), "PIPELINE_QUIET": "1"}
    cmd = [sys.executable, "-m", "decision_pipeline", "review-ui", "add-reviewer", "Grace"]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    secret = out.stdout.strip().splitlines()[-1]
    assert "reviewer 'grace' added" in out.stdout and len(secret) >= 20
    with sqlite3.connect(store_file) as conn:
        stored = conn.execute("SELECT secret_hash FROM review_accounts WHERE name = 'grace'").fetchone()[0]
    assert secret not in stored and stored.startswith("scrypt:")
    again = subprocess.run(cmd[:-1] + ["GRACE"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert again.returncode == 2 and "reviewer 'grace' exists already" in again.stderr
    lookalike = subprocess.run(cmd[:-1] + ["gr\u0430ce"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert lookalike.returncode == 2 and "use only a-z" in lookalike.stderr
