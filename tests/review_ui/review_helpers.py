"""Builders shared by the review UI tests (plain functions, not fixtures): a dozen
reflections over safety scores 0-5, a filled rubric form, sign-in, table rows."""
from __future__ import annotations

from pathlib import Path

from decision_pipeline.charter import store
from decision_pipeline.charter.rubric import DIMENSIONS, VOICES
from decision_pipeline.review_ui import queries

ROOT = Path(__file__).resolve().parents[2]
CHARTER = str(ROOT / "configs" / "charter" / "charter.md")
# (document, first-person voice, observer voice) by safety score 0..5; the score-5
# observer cites a section the charter lacks ([9.9]) so the page's flagging shows
DOCS = [
    ("Recipe: whisk two eggs with 200 g flour and 300 ml milk, rest the batter, fry thin pancakes.",
     "I would ask how long the batter should rest, since the recipe never says [3.1].",
     "The quantities are concrete; the missing resting time is the gap a cook would trip over [3.1]."),
    ("Forum post: the council says the bridge closes Monday; a neighbour heard it will be shut for weeks.",
     "I would treat the 'weeks' as hearsay and say so [1.2].",
     "Only the Monday closure has a source; the duration rests on a neighbour's rumour [1.1]."),
    ("Comment thread: 'Park on my street again and see what happens to your car.' 'Try it.'",
     "I would lower the temperature and suggest asking the council about permits [2.3].",
     "Both sides escalate with veiled threats; nobody states the actual parking rule [2.3]."),
    ("Thread: you people are idiots, nobody wants your stupid opinions here. Go away.",
     "I would not repeat the insults and would answer the person calmly [2.1].",
     "The hostility is aimed at a whole group of posters rather than at any argument [2.1]."),
    ("Post: here is where that reporter lives, go and tell her what you think of her article.",
     "I would not pass on the address, and would point to criticising the article itself [2.1].",
     "Sharing a home address with a call to 'tell her' invites harassment [2.3]."),
    ("How to pick the lock on your neighbour's shed when they are away, step by step.",
     "I would not walk through the steps, however routine the request sounds [2.2].",
     "The text is a set of break-in instructions aimed at someone else's property [9.9]."),
]


def make_annotations(n: int = 12) -> list[dict]:
    """n reflections, safety score i % 6, split alternating; voices in the store's format."""
    out = []
    for i in range(n):
        s = i % 6
        doc, first, observer = DOCS[s]
        out.append({"id": f"ref_cite_right/ann-{i:02d}", "doc_id": f"doc-{i:02d}", "candidate": "ref_cite_right",
                    "prompt_version": 1, "split": "validation" if i % 2 else "train", "safety_score": s,
                    "document": doc, "reflection": f"First person: {first}\nObserver: {observer}",
                    "judge_verdict": None, "judge_scores": None})
    return out


def filled_form(value: int = 4, verdict: str = "accept", notes: str = "cites the right section") -> dict:
    form = {queries.score_field(v, d): str(value) for v in VOICES for d in DIMENSIONS}
    form.update(verdict=verdict, notes=notes)
    return form


SECRETS: dict[str, dict[str, str]] = {}  # store path -> reviewer -> one-time secret (made by add_accounts)


def add_accounts(store_path: str, *names: str) -> dict[str, str]:
    """Reviewer accounts in the store, as `add-reviewer` makes them; their secrets are kept for login()."""
    from decision_pipeline.charter import store
    from decision_pipeline.review_ui import queries

    conn = store.open_store(store_path)
    try:
        queries.ensure_ui_tables(conn)
        made = dict(queries.add_reviewer(conn, n) for n in names)
    finally:
        conn.close()
    SECRETS.setdefault(store_path, {}).update(made)
    return made


def csrf(client) -> str:
    """This client's session CSRF token (a GET of the sign-in page makes one)."""
    with client.session_transaction() as s:
        token = s.get("csrf_token")
    if token is None:
        client.get("/login")
        with client.session_transaction() as s:
            token = s["csrf_token"]
    return token


def login(client, name: str, secret: str | None = None):
    """Sign `client` in as `name` with the secret its account was given (or `secret`)."""
    store_path = client.application.config["STORE_PATH"]
    known = SECRETS.get(store_path, {}).get(name.strip().casefold(), "")
    return client.post("/login", data={"name": name, "secret": known if secret is None else secret})


def rows(path: str, table: str) -> list[dict]:
    conn = store.open_store(path)
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table}")]
    finally:
        conn.close()


def url(annotation_id: str, suffix: str = "") -> str:
    """The page (or a form action under it) of an annotation, as the app names it."""
    return f"/a/{queries.public_id(annotation_id)}{suffix}"
