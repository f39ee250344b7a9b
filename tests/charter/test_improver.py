"""The improver: the deterministic pick by most frequent failure, and the endpoint improver
against a real local HTTP server (scripted answers): a good edit becomes the next prompt
version; garbage and an edit pasting charter text are refused with the rule they broke."""
from __future__ import annotations

import json

import pytest

from decision_pipeline.charter.improver import (EDITS, DeterministicImprover, apply_edit,
                                                failure_summary)
from decision_pipeline.charter.prompts import load_prompt
from decision_pipeline.common.errors import PipelineError


def _rec(repeat: int, fp: list[str], ob: list[str]) -> dict:
    return {"repeat": repeat, "flags": {"first_person": fp, "observer": ob}}


def test_deterministic_improver_addresses_the_most_frequent_failure_first(charter):
    recs = [_rec(0, ["wrong_voice"], ["summary"]), _rec(0, [], ["summary", "verbose"]), _rec(0, ["verbose"], ["summary"]),
            _rec(1, ["wrong_voice"], ["wrong_voice"])]          # repeat 1 repeats the flags: not counted twice
    failures = failure_summary(recs)
    assert failures == {"summary": 3, "verbose": 2, "wrong_voice": 1}
    prompt = load_prompt("configs/prompts/small_base.md", charter)
    imp = DeterministicImprover()
    assert imp.propose(prompt, failures, []) == ("summary", EDITS["summary"][0])
    assert imp.propose(prompt, failures, ["summary"]) == ("verbose", EDITS["verbose"][0])
    # every failing rule addressed once: the most frequent gets its stronger rewording, then the next
    assert imp.propose(prompt, failures, ["summary", "verbose", "wrong_voice"]) == ("summary", EDITS["summary"][1])
    assert imp.propose(prompt, failures, ["summary", "verbose", "wrong_voice", "summary"]) == \
        ("verbose", EDITS["verbose"][1])
    assert imp.propose(prompt, failures, ["summary", "verbose", "wrong_voice"] * 2) is None
    text, nxt = apply_edit(prompt, EDITS["summary"][0], charter, "rev2.md")
    assert nxt.version == prompt.version + 1 and text.rstrip().endswith(EDITS["summary"][0])


def test_every_library_edit_passes_the_prompt_checker(charter):
    prompt = load_prompt("configs/prompts/small_base.md", charter)
    for rule_name, edits in EDITS.items():
        for k, edit in enumerate(edits):
            apply_edit(prompt, edit, charter, f"{rule_name}{k}.md")


def test_endpoint_improver_edit_becomes_the_next_version(stub, charter):
    server, imp = stub([json.dumps({"rule": "wrong_voice", "edit": "Observer never  says 'I'."})])
    prompt = load_prompt("configs/prompts/small_base.md", charter)
    rule_name, edit = imp.propose(prompt, {"wrong_voice": 4, "summary": 1}, [])
    assert (rule_name, edit) == ("wrong_voice", "Observer never says 'I'.")
    assert server.bodies[0]["model"] == "improver" and '"wrong_voice": 4' in server.bodies[0]["messages"][0]["content"]
    assert apply_edit(prompt, edit, charter, "rev.md")[1].version == prompt.version + 1


@pytest.mark.parametrize("answer,match", [
    ("not json at all", r"the answer \(choices\[0\]\.message\.content\) is not JSON \(\"not json at all\"\)"),
    ("RAW:<html>502</html>", r"the reply is not JSON \('<html>502</html>'\)"),
    ('RAW:{"choices": "oops"}', r"malformed reply: field choices is \"oops\", expected a non-empty list"),
    ("RAW:[1, 2]", r"malformed reply: the reply is \[1, 2\], expected a JSON object"),
    ('RAW:{"choices": []}', r"field choices is \[\], expected a non-empty list"),
    ('RAW:{"choices": [{"index": 0}]}', r"field choices\[0\]\.message is null, expected a JSON object"),
    ('RAW:{"choices": [{"message": {"content": null}}]}', r"field choices\[0\]\.message\.content is null, "
                                                          r"expected a string"),
    ('RAW:{"choices": [{"message": {"content": ["a"]}}]}', r"content is \[\"a\"\], expected a string"),
    (json.dumps(["summary", "x"]), r"the answer is \[\"summary\", \"x\"\], not a JSON object"),
    (json.dumps({"rule": "made_up", "edit": "x"}), "rule 'made_up' is not one of the failures"),
    (json.dumps({"rule": None, "edit": "x"}), "rule None is not one of the failures"),
    (json.dumps({"rule": "summary", "edit": ""}), "edit must be one non-empty line"),
    (json.dumps({"rule": "summary", "edit": 7}), "edit must be one non-empty line .*got 7"),
])
def test_endpoint_improver_garbage_is_one_error(stub, charter, answer, match):
    """Every malformed reply or answer is one PipelineError line naming the endpoint and the field."""
    server, imp = stub([answer])
    with pytest.raises(PipelineError, match=match) as err:
        imp.propose(load_prompt("configs/prompts/small_base.md", charter), {"summary": 2}, [])
    assert str(err.value).startswith(f"{imp.url}: " if "reply" in str(err.value) else f"improver {imp.url}")
    assert "\n" not in str(err.value) and len(server.bodies) == 1


def test_endpoint_improver_unreachable_or_slow_is_one_error(charter):
    import socket
    import threading
    from decision_pipeline.charter.improver import EndpointImprover
    prompt = load_prompt("configs/prompts/small_base.md", charter)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PipelineError, match=r"unreachable or gave no answer within 5s.*improve\.base_url"):
        EndpointImprover(f"http://127.0.0.1:{port}/v1", "improver", 5.0).propose(prompt, {"summary": 1}, [])
    with socket.socket() as hung:   # accepts the connection, never answers
        hung.bind(("127.0.0.1", 0))
        hung.listen()
        started = __import__("time").monotonic()
        with pytest.raises(PipelineError, match=r"no answer within 0.3s .*raise improve\.timeout_s"):
            EndpointImprover(f"http://127.0.0.1:{hung.getsockname()[1]}/v1", "improver", 0.3).propose(
                prompt, {"summary": 1}, [])
        assert __import__("time").monotonic() - started < 3
    assert threading.active_count() >= 1


def test_endpoint_improver_finishes_a_candidate_with_no_failures_left(stub, charter, tmp_path):
    """The bug of #33.7: once a revision removes the last failure the loop stops there; the endpoint is never
    asked to name a rule for nothing (it used to answer rule null: 'rule None is not one of the failures')."""
    from decision_pipeline.charter.improver import improve
    server, imp = stub([json.dumps({"rule": "summary", "edit": EDITS["summary"][0]}),
                        json.dumps({"rule": None, "edit": ""})])    # what a model says when asked about nothing
    prompt = load_prompt("configs/prompts/small_base.md", charter)
    assert imp.propose(prompt, {}, []) is None and imp.propose(prompt, {"summary": 0}, ["summary"]) is None
    assert server.bodies == []      # no failures: no request at all

    def reflect_fn(p):
        return [{"fixed": EDITS["summary"][0] in p.template} for _ in range(4)]

    def judge_fn(rows):
        return [{"repeat": 0, "flags": {"first_person": [] if r["fixed"] else ["summary"], "observer": []},
                 "verdict": "accept" if r["fixed"] else "reject"} for r in rows]

    hist = improve(prompt, charter, reflect_fn, judge_fn, imp, max_revisions=5, out_dir=tmp_path)
    assert [(h["rule"], h["failures"], h["accept_rate"]) for h in hist] == [("summary", {"summary": 4}, 0.0),
                                                                             (None, {}, 1.0)]
    assert len(server.bodies) == 1 and server.script == [json.dumps({"rule": None, "edit": ""})]
    from decision_pipeline.charter.improve_run import _stop_reason
    assert _stop_reason(hist, 5) == "no failure left"


def test_edit_pasting_charter_text_is_refused_with_the_rule(stub, charter):
    section = next(iter(charter.sections.values()))
    _, imp = stub([json.dumps({"rule": "summary", "edit": "Remember: " + section.text})])
    prompt = load_prompt("configs/prompts/small_base.md", charter)
    _, edit = imp.propose(prompt, {"summary": 2}, [])
    with pytest.raises(PipelineError, match=r"improver edit refused \(prompts may not hardcode charter text.*pastes "
                                            r"charter text"):
        apply_edit(prompt, edit, charter, "rev.md")


def test_loop_on_a_prompt_reading_toy_generator_records_each_revision(charter, tmp_path):
    """A toy generator that follows the library edits it finds in its prompt: each revision
    removes one failure, so the accept rate climbs and the history holds >= 2 revisions."""
    from decision_pipeline.charter.improver import fresh_sample, improve
    docs = [{"id": f"d{i}"} for i in range(12)]
    sample = fresh_sample(docs, {"d0", "d1"}, 6, seed=0)
    assert len(sample) == 6 and not {"d0", "d1"} & {d["id"] for d in sample}
    with pytest.raises(PipelineError, match="only 10 documents outside the reviewed items"):
        fresh_sample(docs, {"d0", "d1"}, 11, seed=0)

    def reflect_fn(prompt):
        return [{"doc": d["id"], "fixed": {r for r, e in EDITS.items() if e[0] in prompt.template}} for d in sample]

    def judge_fn(rows):   # doc index parity: summary on every doc, wrong voice on half
        out = []
        for i, r in enumerate(rows):
            flags = [f for f in (["summary"] + (["wrong_voice"] if i % 2 else [])) if f not in r["fixed"]]
            out.append({"repeat": 0, "flags": {"first_person": flags, "observer": []},
                        "verdict": "reject" if flags else "accept"})
        return out

    prompt = load_prompt("configs/prompts/small_base.md", charter)
    hist = improve(prompt, charter, reflect_fn, judge_fn, DeterministicImprover(), max_revisions=5, out_dir=tmp_path)
    assert [h["accept_rate"] for h in hist] == [0.0, 0.5, 1.0]
    assert [h["rule"] for h in hist] == ["summary", "wrong_voice", None]
    assert [h["version"] for h in hist] == [prompt.version, prompt.version + 1, prompt.version + 2]
    assert all((tmp_path / f"v{h['version']}.md").is_file() for h in hist)
    assert EDITS["wrong_voice"][0] in (tmp_path / f"v{prompt.version + 2}.md").read_text()
    capped = improve(prompt, charter, reflect_fn, judge_fn, DeterministicImprover(), max_revisions=1,
                     out_dir=tmp_path / "capped")
    assert len(capped) == 2 and capped[-1]["rule"] is None
