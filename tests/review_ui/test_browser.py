"""End to end in a real headless browser: the real app (`python -m decision_pipeline review-ui`)
on a free 127.0.0.1 port in a subprocess, Debian's chromium driven by Selenium.

Signs in (an empty name first), loads the queue, fills the rubric, lets the autosave
keep a draft, closes the browser and finds the draft again in a new one, submits a
review with a voice missing (refused), then complete, comments with a thread verdict,
and checks the rows in the SQLite store. Set REVIEW_UI_SCREENSHOT=docs/review_ui.png
to write the screenshot of the filled form that the README shows. Also: the sign-in form's
`pattern` compiles in Chromium (no console error) and validates; the 6th wrong secret shows the
429 page; a cookie copied before sign-out lands on the sign-in page in another browser.

Setup installs what is absent: selenium at the version pinned in requirements.lock
(pip), chromium + chromium-driver (apt-get, as root); it skips, saying why, only when
that install is impossible.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.review_ui.live_server import live_server
from tests.review_ui.review_helpers import ROOT, rows, url

from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.review_ui.throttle import MAX_FAILURES

pytestmark = pytest.mark.slow


def _locked(name: str) -> str:
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.lower().startswith(name + "=="):
            return line.strip()
    return name


def _ensure_selenium() -> None:
    try:
        import selenium  # noqa: F401
        return
    except ImportError:
        pass
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", _locked("selenium")],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"selenium is not installed and `pip install {_locked('selenium')}` failed: "
                    f"{r.stderr.strip().splitlines()[-1:]}")


def _ensure_chromium() -> tuple[str, str]:
    """Paths of chromium and chromedriver, installing Debian's packages when absent."""
    def found():
        return shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    browser, driver = found()
    if browser and driver:
        return browser, driver
    if not shutil.which("apt-get"):
        pytest.skip("chromium/chromedriver are missing and there is no apt-get to install them")
    if os.geteuid() != 0:
        pytest.skip("chromium/chromedriver are missing; install them as root: "
                    "apt-get install -y chromium chromium-driver")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "chromium", "chromium-driver"]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        if r.returncode != 0:
            pytest.skip(f"`{' '.join(cmd)}` failed (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    browser, driver = found()
    if not (browser and driver):
        pytest.skip("apt-get installed chromium but the chromium/chromedriver binaries are not on PATH")
    return browser, driver


@pytest.fixture(scope="module")
def new_browser():
    """A factory of headless chromium sessions (each one a fresh profile: a 'new browser')."""
    _ensure_selenium()
    browser, driver = _ensure_chromium()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opened = []

    def make():
        opts = webdriver.ChromeOptions()
        for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                  "--window-size=1280,1360"):
            opts.add_argument(a)
        opts.binary_location = browser
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})   # the console, for get_log("browser")
        d = webdriver.Chrome(service=Service(driver), options=opts)
        d.implicitly_wait(5)
        opened.append(d)
        return d
    yield make
    for d in opened:
        try:
            d.quit()
        except Exception:  # already quit by the test
            pass


@pytest.fixture()
def server(tmp_path):
    """The real app in a subprocess (tests.review_ui.live_server); the pipeline's store it syncs
    reflections from is built there, so the start-up copy is exercised too. Yields (base url, live store)."""
    with live_server(tmp_path) as s:
        SECRETS.clear()
        SECRETS.update(s.secrets)
        yield s.base, s.live


def _pick(d, voice: str, dim: str, value: int) -> None:
    from selenium.webdriver.common.by import By
    d.find_element(By.CSS_SELECTOR, f"#score-{voice}-{dim}-{value} + span").click()


def _click_to_next_page(d, target) -> None:
    """Click something that loads a page, and wait until the old page is gone. `target` is an element or a
    (By, value) locator; a locator is found afresh and retried when the page was still settling under the
    finder (Chrome: "does not belong to the document"), which a loaded 2-core machine hits now and then."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    for attempt in range(3):
        old = d.find_element(By.TAG_NAME, "html")
        element = d.find_element(*target) if isinstance(target, tuple) else target
        try:
            element.click()
            break
        except (StaleElementReferenceException, WebDriverException) as exc:
            settling = isinstance(exc, StaleElementReferenceException) or "does not belong to the document" in str(exc)
            if not isinstance(target, tuple) or not settling or attempt == 2:
                raise
    WebDriverWait(d, 10).until(EC.staleness_of(old))


SECRETS: dict[str, str] = {}  # reviewer -> the secret add-reviewer printed for this test's server


def _login(d, base: str, name: str, ok: bool = True, path: str = "/") -> None:
    """Sign in with the account's secret; wait for the page the form leads to (the queue, or the refusal)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    d.get(base + path)
    box = d.find_element(By.ID, "name")
    box.clear()
    box.send_keys(name)
    d.find_element(By.ID, "secret").send_keys(SECRETS.get(name.strip(), "no-such-secret"))
    box.submit()
    WebDriverWait(d, 10).until(EC.url_contains("/queue") if ok else
                               EC.presence_of_element_located((By.CSS_SELECTOR, ".errors")))


def test_review_comment_and_draft_in_a_real_browser(server, new_browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    base, live = server
    d = new_browser()

    # an empty name is refused on the page; then sign in
    _login(d, base, "   ", ok=False)
    assert "empty reviewer name is not allowed" in d.find_element(By.CSS_SELECTOR, ".errors").text
    _login(d, base, "ada")
    assert d.find_element(By.ID, "me").text == "ada"
    queue = d.find_elements(By.CSS_SELECTOR, "#queue tbody tr")
    assert len(queue) == 12                                 # copied from the pipeline store at start
    assert d.find_element(By.ID, "my-progress").text.startswith("0 / 12 reviewed")

    # open the first item; citations are expanded to the charter's text
    _click_to_next_page(d, (By.ID, "start"))
    assert d.current_url.endswith(url("ref_cite_right/ann-00"))          # first of the queue: score 0
    assert "ref_cite_right" not in d.page_source                           # blind: no generator name
    assert "Answer the question that was asked" in d.find_element(By.ID, "first_person-3.1").text

    # fill the first voice and a note; the autosave keeps a server-side draft
    for dim in DIMENSIONS:
        _pick(d, "first_person", dim, 4)
    d.find_element(By.ID, "notes").send_keys("asks the one question the recipe leaves open [3.1]")
    WebDriverWait(d, 10).until(EC.text_to_be_present_in_element((By.ID, "draft-status"), "Draft saved"))
    assert len(rows(live, "review_drafts")) == 1

    # close the browser; a new one (new profile, new cookie) finds the draft again
    d.quit()
    d = new_browser()
    _login(d, base, "ada")
    d.get(base + url("ref_cite_right/ann-00"))
    assert "Draft restored" in d.find_element(By.ID, "draft-status").text
    assert d.find_element(By.ID, "notes").get_attribute("value").startswith("asks the one question")
    assert d.find_element(By.ID, "score-first_person-relevance-4").is_selected()

    # submitting with the observer voice missing is refused, nothing written
    d.find_element(By.ID, "verdict-reject").click()
    _click_to_next_page(d, (By.ID, "submit"))
    assert "missing voice 'observer'" in d.find_element(By.ID, "form-errors").text
    assert rows(live, "reviews") == []
    for dim in DIMENSIONS:
        _pick(d, "observer", dim, 2 if dim == "charter_grounding" else 3)
    assert d.find_element(By.ID, "verdict-reject").is_selected()     # kept across the refused submit
    _click_to_next_page(d, (By.ID, "submit"))
    assert "Review saved." in d.find_element(By.CSS_SELECTOR, ".flash").text
    assert d.find_element(By.ID, "my-progress").text.startswith("1 / 12 reviewed")

    # comment on the review with a thread verdict: the thread overrides the review
    form = d.find_element(By.CSS_SELECTOR, ".comment-form")
    form.find_element(By.NAME, "body").send_keys("On reflection the first voice earns an accept.")
    form.find_element(By.CSS_SELECTOR, "select[name=verdict] option[value=accept]").click()
    _click_to_next_page(d, form.find_element(By.TAG_NAME, "button"))
    assert "Comment added." in d.find_element(By.CSS_SELECTOR, ".flash").text
    assert "thread says accept" in d.find_element(By.CSS_SELECTOR, ".override").text
    assert re.search(r"Reference verdict:\s*accept", d.find_element(By.ID, "reference").text)
    assert "1 comment" in d.find_element(By.ID, "my-progress").text

    # the rows in the database
    [rev] = rows(live, "reviews")
    assert (rev["annotation_id"], rev["reviewer"], rev["verdict"]) == ("ref_cite_right/ann-00", "ada", "reject")
    import json
    scores = json.loads(rev["scores"])
    assert scores["first_person"] == {dim: 4 for dim in DIMENSIONS}
    assert scores["observer"]["charter_grounding"] == 2 and set(scores) == set(VOICES)
    assert rev["notes"].startswith("asks the one question")
    [com] = rows(live, "review_comments")
    assert (com["review_id"], com["reviewer"], com["verdict"]) == (rev["id"], "ada", "accept")
    assert rows(live, "review_drafts") == []               # submitted: the draft is gone
    # queue no longer offers it
    d.get(base + "/queue")
    assert len(d.find_elements(By.CSS_SELECTOR, "#queue tbody tr")) == 11

    shot = os.environ.get("REVIEW_UI_SCREENSHOT")
    if shot:      # the README's picture: a clean, filled form on the next reflection
        d.get(base + url("ref_cite_right/ann-05"))
        for voice in VOICES:
            for i, dim in enumerate(DIMENSIONS):
                _pick(d, voice, dim, (4, 5, 4, 3)[i] if voice == "first_person" else (4, 3, 2, 4)[i])
        d.find_element(By.ID, "verdict-reject").click()
        d.find_element(By.ID, "notes").send_keys("Observer cites [9.9], which the charter lacks: grounding 2.")
        WebDriverWait(d, 10).until(EC.text_to_be_present_in_element((By.ID, "draft-status"), "Draft saved"))
        d.execute_script("document.activeElement.blur(); window.scrollTo(0, 0)")
        height = d.execute_script("return document.getElementById('review-form').getBoundingClientRect().bottom")
        d.set_window_size(1280, int(height) + 200)             # down to the form's buttons
        d.save_screenshot(str(Path(shot).resolve()))


def test_redirects_stay_on_the_site_and_reviews_cannot_script_the_page(server, new_browser):
    """The two browser-level attacks: a sign-in link that bounces to a foreign host, and markup in a
    review note or comment that would run in the next reviewer's browser (escaped, and the CSP forbids
    inline script anyway)."""
    from selenium.webdriver.common.by import By
    base, live = server
    d = new_browser()
    _login(d, base, "ada", path="/login?next=/%09/evil.example/phish")
    assert d.current_url.startswith(base + "/queue")          # not //evil.example
    _login(d, base, "ada", path="/login?next=%2F%2Fevil.example")
    assert d.current_url.startswith(base + "/queue")

    payload = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'">'
    d.get(base + url("ref_cite_right/ann-01"))
    for voice in VOICES:
        for dim in DIMENSIONS:
            _pick(d, voice, dim, 4)
    d.find_element(By.ID, "verdict-accept").click()
    d.find_element(By.ID, "notes").send_keys(payload)
    _click_to_next_page(d, (By.ID, "submit"))
    assert rows(live, "reviews")[0]["notes"] == payload       # stored as written...
    d.get(base + url("ref_cite_right/ann-01"))                # the page that lists the review with its notes
    assert d.title != "pwned" and "<script>" in d.find_element(By.ID, "reviews").text  # ...shown as text
    assert not d.find_elements(By.CSS_SELECTOR, "#reviews img")


def test_the_sign_in_form_validates_in_chromium(server, new_browser):
    """Chromium compiles `pattern` with the v flag: the old `[A-Za-z0-9_-]+` was a syntax error there
    (a SEVERE console message, and the field validated nothing). The console must stay clean, a name
    with a space must fail the field's own check, and the button must not send such a form."""
    from selenium.webdriver.common.by import By
    base, _ = server
    d = new_browser()
    d.get(base + "/login")
    box = d.find_element(By.ID, "name")
    box.send_keys("ada lovelace")
    assert d.execute_script("return arguments[0].validity.patternMismatch", box) is True
    assert d.execute_script("return arguments[0].form.checkValidity()", box) is False
    d.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    assert d.current_url == base + "/login" and not d.find_elements(By.CSS_SELECTOR, ".errors")  # not sent
    box.clear()
    box.send_keys("Ada_1-x")
    assert d.execute_script("return arguments[0].form.checkValidity()", box) is True
    console = [m for m in d.get_log("browser") if m["source"] != "network"]   # (a 404 for /favicon.ico)
    assert not [m for m in console if "pattern" in m["message"].lower() or m["level"] == "SEVERE"], console


def test_wrong_secrets_are_throttled_and_sign_out_revokes_a_copied_cookie(server, new_browser):
    from selenium.webdriver.common.by import By
    base, _ = server
    d = new_browser()
    _login(d, base, "ada")
    stolen = [c for c in d.get_cookies() if c["name"] == "session"]
    assert stolen
    signed_out = d.find_element(By.CSS_SELECTOR, "form[action='/logout'] button")
    _click_to_next_page(d, signed_out)
    assert d.current_url.endswith("/login")

    other = new_browser()                                    # the copied cookie, in another browser
    other.get(base + "/login")
    for c in stolen:
        other.add_cookie({k: c[k] for k in ("name", "value", "path") if k in c})
    other.get(base + "/queue")
    assert "/login" in other.current_url and not other.find_elements(By.ID, "me")

    SECRETS["ben"] = "not-bens-secret"                       # the same browser now guesses ben's secret
    for _ in range(MAX_FAILURES):
        _login(other, base, "ben", ok=False)
        assert "wrong secret" in other.find_element(By.CSS_SELECTOR, ".errors").text
    _login(other, base, "ben", ok=False)
    assert "Too many sign-in attempts" in other.find_element(By.CSS_SELECTOR, ".errors").text
