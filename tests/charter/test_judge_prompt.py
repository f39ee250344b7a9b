"""The judge-prompt loop (stage judge_prompt) on a hand-built review set: kappa per revision
hand-computed, only train reviews steer it, validation is read once (rerun reuses the read,
another prompt is refused), and bad input is one line with nothing written."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from decision_pipeline.charter.annotate import reflection_row
from decision_pipeline.charter.charter import load_charter
from decision_pipeline.charter.checks import CheckParams
from decision_pipeline.charter.directives import directive_line
from decision_pipeline.charter.generators import ReferenceGenerator
from decision_pipeline.common.profiles import merged_profile
from stages import judge_prompt

ROOT = Path(__file__).resolve().parents[2]
QA = "Q: How do I tighten the library after connecting the flour? I am using Firefox {i}."
# reported speech ("told"): the references read a news item as one to cite Sources [4.2], which the judge's
# register rule also counts as fitting; the hand-computed kappas below rest on the two agreeing
NEWS = "Geneva, May 13 - Lindqvist told reporters the company was a senior ambassador on day {i}."
# doc id -> (text, safety score, split)
DOCS = {"t0": (QA, 0, "train"), "t1": (NEWS, 1, "train"), "t2": (QA, 2, "train"), "t3": (NEWS, 2, "train"),
        "v0": (QA, 0, "validation"), "v1": (NEWS, 2, "validation")}
# reference verdicts: the reviewers reject an uncited reflection on a safety-2 document
TRAIN = {"ref_cite_right": {"t0": "accept", "t1": "accept", "t2": "accept", "t3": "accept"},
         "ref_cite_nothing": {"t0": "accept", "t1": "accept", "t2": "reject", "t3": "reject"},
         "ref_summarise": {"t0": "reject", "t1": "reject"}}
VALID = {"ref_cite_right": {"v0": "accept", "v1": "accept"}, "ref_cite_nothing": {"v1": "reject"},
         "ref_summarise": {"v0": "reject"}}
ARGS = ["--reflect-dir", "refl", "--export", "export.jsonl", "--out-dir", "out", "--metrics", "m.json",
        "--reads", "reads.json"]


def write_export(verdicts: dict[str, dict[str, str]], path: str = "export.jsonl") -> None:
    scores = {v: {d: 4 for d in ("relevance", "specificity", "charter_grounding", "voice_tone")}
              for v in ("first_person", "observer")}
    rows = [{"kind": "review", "id": f"r{i:02d}", "annotation_id": f"{c}/{d}", "reviewer": "ada", "scores": scores,
             "verdict": v, "notes": "", "created_at": f"2026-01-01T10:{i:02d}:00"}
            for i, (c, d, v) in enumerate((c, d, v) for c, m in verdicts.items() for d, v in m.items())]
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = merged_profile("micro", ROOT)
    params["reflect"]["charter"] = str(ROOT / "configs/charter/charter.md")
    params["reflect"]["candidates"] = {n: params["reflect"]["candidates"][n] for n in TRAIN}
    params["judge"]["prompt"] = str(ROOT / "configs/prompts/judge.md")
    Path("params.yaml").write_text(yaml.safe_dump(params))
    charter = load_charter(params["reflect"]["charter"])
    checks = CheckParams(harm_threshold=3, max_words=60, summary_overlap=0.5)
    docs = [{"id": k, "text": t.format(i=k), "safety_score": s, "split": sp} for k, (t, s, sp) in DOCS.items()]
    Path("refl").mkdir()
    for name in TRAIN:
        gen = ReferenceGenerator(name, name, charter, checks)
        rows = [reflection_row(name, "reference", 1, d, t, gen) for d, t in zip(docs, gen.reflect(docs))]
        Path(f"refl/{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_export({c: {**TRAIN[c], **VALID.get(c, {})} for c in TRAIN})
    return params


def test_loop_moves_train_kappa_as_hand_computed_and_freezes_the_best_prompt(world):
    assert judge_prompt.main(ARGS) == 0
    m = json.loads(Path("m.json").read_text())
    # v3 (harmful_from 3) on 10 train reflections: judge accepts 8 (cite_nothing on t2/t3 too), reviewers 6;
    # agree 8/10; pe = .8 x .6 + .2 x .4 = .56; kappa = (.8 - .56) / .44 = 6/11. harmful_from 2 rejects
    # t2/t3 uncited: agreement 10/10, kappa 1. From there no one-step change raises kappa: stop.
    assert [h["version"] for h in m["history"]] == [3, 4]
    assert m["history"][0]["kappa"] == pytest.approx(6 / 11) and m["history"][1]["kappa"] == pytest.approx(1.0)
    assert m["history"][1]["edit"] == {"directive": "harmful_from", "from": 3, "to": 2}
    assert m["history"][0]["n"] == 10 and m["train"]["gain"]["diff"] == pytest.approx(1 - 6 / 11)
    assert m["stopped"].startswith("no directive step raises train kappa")
    assert m["final_directives"]["harmful_from"] == 2 and m["final_version"] == 4
    final = Path("out/final.md").read_text()
    assert final == Path("out/v4.md").read_text() and directive_line("harmful_from", 2) in final
    assert sorted(p.name for p in Path("out").iterdir()) == ["final.md", "v3.md", "v4.md"]
    # validation read once with the frozen prompt: all four agree -> kappa 1 on n 4
    assert m["validation"]["kappa"] == pytest.approx(1.0) and m["validation"]["n"] == 4
    assert "reused_recorded_read" not in m["validation"]   # a forced rerun must write the same bytes
    reads = json.loads(Path("reads.json").read_text())["reads"]
    assert len(reads) == 1 and reads[0]["prompt_version"] == 4 and reads[0]["n"] == 4


def test_validation_reviews_never_steer_the_loop(world):
    assert judge_prompt.main(ARGS) == 0
    first = json.loads(Path("m.json").read_text())
    flipped = {c: {d: ("reject" if v == "accept" else "accept") for d, v in m.items()} for c, m in VALID.items()}
    write_export({c: {**TRAIN[c], **flipped.get(c, {})} for c in TRAIN})
    Path("reads.json").unlink()    # a different validation set anyway; start a fresh ledger
    assert judge_prompt.main(ARGS) == 0
    second = json.loads(Path("m.json").read_text())
    assert second["history"] == first["history"] and second["rejected"] == first["rejected"]
    assert second["validation"]["kappa"] != first["validation"]["kappa"]


def test_a_rerun_reuses_the_read_and_another_prompt_is_refused(world, capsys):
    assert judge_prompt.main(ARGS) == 0
    first = Path("m.json").read_bytes()
    capsys.readouterr()
    assert judge_prompt.main(ARGS) == 0    # same frozen prompt: the recorded read, not a second one
    out = capsys.readouterr()
    assert "reused_read=True" in out.out + out.err
    m = json.loads(Path("m.json").read_text())
    assert Path("m.json").read_bytes() == first and len(json.loads(Path("reads.json").read_text())["reads"]) == 1
    before = {p: Path(p).read_bytes() for p in ("m.json", "reads.json", "out/final.md")}
    world["judge_prompt"]["max_revisions"] = 0    # the loop now freezes v3: another prompt, same validation
    Path("params.yaml").write_text(yaml.safe_dump(world))
    capsys.readouterr()
    assert judge_prompt.main(ARGS) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: reads.json: reads[0]: this validation set was already read")
    assert "compare revisions by train kappa" in err[0]
    assert {p: Path(p).read_bytes() for p in before} == before   # nothing rewritten
    assert sorted(p.name for p in Path("out").iterdir()) == ["final.md", "v3.md", "v4.md"]


def test_reviews_that_all_agree_on_one_label_are_refused(world, capsys):
    write_export({c: {d: "accept" for d in {**TRAIN[c], **VALID.get(c, {})}} for c in TRAIN})
    capsys.readouterr()
    assert judge_prompt.main(ARGS) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: export.jsonl: every train reference verdict is 'accept': kappa is undefined with one "
                   "label; review reflections the reviewers reject as well as accept (or check the import)"]
    assert not Path("m.json").exists() and not Path("out").exists() and not Path("reads.json").exists()


@pytest.mark.parametrize("body,match", [
    ("{charter}\n{document}\nScore it.\n", "a judge prompt needs the {reflection} placeholder"),
    ("{charter}\n{document}\n{reflection}\ndirective: harmful_from = 8\n", "directive harmful_from = 8 is outside"),
])
def test_a_bad_judge_prompt_is_one_line_naming_the_file(world, capsys, body, match):
    Path("bad.md").write_text("---\nversion: 1\n---\n" + body)
    world["judge"]["prompt"] = "bad.md"
    Path("params.yaml").write_text(yaml.safe_dump(world))
    capsys.readouterr()
    assert judge_prompt.main(ARGS) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: bad.md") and match in err[0]
    assert not Path("m.json").exists() and not Path("out").exists()


def test_endpoint_improver_edits_are_kept_only_when_train_kappa_rises(world, stub, capsys):
    server, _ = stub([json.dumps({"directive": "harmful_from", "value": 2}), json.dumps({"line": "Be thorough."})])
    world["judge_prompt"].update(improver="endpoint", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                                 model="improver", max_revisions=2)
    Path("params.yaml").write_text(yaml.safe_dump(world))
    assert judge_prompt.main(ARGS) == 0
    m = json.loads(Path("m.json").read_text())
    assert [h["version"] for h in m["history"]] == [3, 4] and m["rejected"][0]["line"] == "Be thorough."
    assert m["rejected"][0]["gain"] == pytest.approx(0.0) and len(server.bodies) == 2
    assert "safety 2: judge accept, reviewers reject" in server.bodies[0]["messages"][0]["content"]
    shutil.rmtree("out")
    Path("m.json").unlink()
    server.script.append("not json")
    world["judge_prompt"]["max_revisions"] = 1
    Path("params.yaml").write_text(yaml.safe_dump(world))
    capsys.readouterr()
    assert judge_prompt.main(ARGS) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "answered garbage" in err[0] and not Path("m.json").exists()
