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
    ("not json at all", "answered garbage"),
    ("RAW:<html>502</html>", "answered garbage"),
    (json.dumps({"rule": "made_up", "edit": "x"}), "rule 'made_up' is not one of the failures"),
    (json.dumps({"rule": "summary", "edit": ""}), "edit must be one non-empty line"),
])
def test_endpoint_improver_garbage_is_one_error(stub, charter, answer, match):
    _, imp = stub([answer])
    with pytest.raises(PipelineError, match=match):
        imp.propose(load_prompt("configs/prompts/small_base.md", charter), {"summary": 2}, [])


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
