"""ref_follows_prompt: a rule generator that follows its prompt. Each improver edit switches the
behaviour it names, what it says it wrote (properties, read by the simulated reviewers) matches
what the hard checks find in the text, and the improver loop raises its accept rate beyond noise."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from decision_pipeline.charter.charter import citations
from decision_pipeline.charter.checks import CheckParams, hard_checks, split_voices
from decision_pipeline.charter.generators import (FOLLOWER_INSTRUCTIONS, PromptFollowingGenerator,
                                                  follower_behaviour, reference_generator)
from decision_pipeline.charter.improver import EDITS
from decision_pipeline.charter.prompts import Prompt, load_prompt
from decision_pipeline.common.errors import PipelineError
from tests.charter.test_stages import run_refs, work  # noqa: F401  (the stage fixture)

ROOT = Path(__file__).resolve().parents[2]
CHECKS = CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5)
DOCS = [{"id": "d0", "text": "Q: How do I restore the backup archive after the update broke my settings?",
         "safety_score": 0},
        {"id": "d1", "text": "Thread: hot take lol | user9: the patch nerfed my build again, devs are clueless",
         "safety_score": 4}]
SWITCHES = {"wrong_voice": "in_voice", "summary": "engages", "formulaic_opener": "no_opener",
            "uncited_harm": "cite_harmful"}


def test_the_project_prompt_starts_with_no_instruction_it_follows(charter):
    p = load_prompt(ROOT / "configs/prompts/ref_follows_prompt.md", charter)
    assert not any(follower_behaviour(p.template).values())


@pytest.mark.parametrize("rule_name", sorted(SWITCHES))
def test_each_improver_edit_switches_the_behaviour_it_addresses(rule_name):
    for line in EDITS[rule_name]:      # both wordings of the library edit
        on = {b for b, v in follower_behaviour(line).items() if v}
        assert on == {SWITCHES[rule_name]}, line


def test_baseline_faults_and_fixes_as_the_hard_checks_see_them(charter):
    base = PromptFollowingGenerator("f", charter, CHECKS, Prompt("p", 1, "{charter}\n{document}\n"))
    flags = hard_checks(split_voices(base.one(DOCS[0])), DOCS[0]["text"], 0, charter, CHECKS)
    assert flags == {"first_person": ["wrong_voice", "summary", "formulaic_opener"],
                     "observer": ["wrong_voice", "summary"]}
    told = Prompt("p", 2, "{charter}\n{document}\n" + "\n".join(EDITS[r][0] for r in SWITCHES))
    fixed = PromptFollowingGenerator("f", charter, CHECKS, told)
    for d in DOCS:
        got = hard_checks(split_voices(fixed.one(d)), d["text"], d["safety_score"], charter, CHECKS)
        assert got == {"first_person": [], "observer": []}, d["id"]
    assert citations(fixed.one(DOCS[1])) and not citations(fixed.one(DOCS[0]))   # cites on harmful text only


def test_what_it_says_it_wrote_matches_the_text_for_every_combination(charter):
    for combo in itertools.product((False, True), repeat=len(FOLLOWER_INSTRUCTIONS)):
        gen = PromptFollowingGenerator("f", charter, CHECKS, Prompt("p", 1, "{charter}\n{document}\n"))
        gen.behaviour = dict(zip(FOLLOWER_INSTRUCTIONS, combo))
        for d in DOCS:
            voices = split_voices(gen.one(d))
            flags = hard_checks(voices, d["text"], d["safety_score"], charter, CHECKS)
            for v, p in gen.properties(d).items():
                assert p["in_voice"] == ("wrong_voice" not in flags[v])
                assert p["engages"] == ("summary" not in flags[v])
                assert p["opener"] == ("formulaic_opener" in flags[v])
                assert (p["cites"] == "fitting") == bool(citations(voices[v]))


def test_the_follower_needs_a_prompt(charter):
    with pytest.raises(PipelineError, match="ref_follows_prompt follows its prompt; give it one"):
        reference_generator("f", "ref_follows_prompt", charter, CHECKS, None)


def test_improver_loop_raises_its_accept_rate_beyond_noise(work):  # noqa: F811
    import yaml

    from stages import improve, seed_sample, throughput
    params = work[1]
    params["improve"]["max_revisions"] = 4
    Path("params.yaml").write_text(yaml.safe_dump(params))
    assert seed_sample.main([]) == 0 and throughput.main(["ref_follows_prompt"]) == 0
    assert improve.main(["ref_follows_prompt"]) == 0
    m = json.loads(Path("metrics/charter/improve/ref_follows_prompt.json").read_text())
    hist = m["history"]
    assert m["follows_prompt"] and m["accept_rate_start"] == 0.0
    # most frequent failure first: summary and wrong_voice (both voices, every reflection), then the
    # first-person opener and uncited harm (one per reflection each; ties by name)
    assert [h["rule"] for h in hist] == ["summary", "wrong_voice", "formulaic_opener", "uncited_harm", None]
    rates = [h["accept_rate"] for h in hist]
    # wrong voice rejects until fixed; then benign documents pass (opener caps tone at 3, mean still >= 4);
    # harmful ones pass once they cite
    assert rates[:2] == [0.0, 0.0] and rates[4] > 0.95
    assert rates[2] == pytest.approx(0.5, abs=0.06) and rates[3] == pytest.approx(0.5, abs=0.06)
    assert hist[-1]["accept_rate_ci95"][0] > hist[0]["accept_rate_ci95"][1] and m["rise_beyond_noise"]
