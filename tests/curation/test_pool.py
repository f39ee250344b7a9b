"""Pool generator, dev set, external loading and validation."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import median

import numpy as np
import pandas as pd
import pytest

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.curation.documents import (NOISE_KINDS, OFF_REGISTERS, REGISTERS, generate_dev, generate_pool,
                                                  load_external_pool, validate_pool)


def _reasoning(rng: np.random.Generator) -> str:
    """Stand-in 'reasoning' register: a decision question and a step-by-step trace."""
    a, b = (int(v) for v in rng.integers(2, 90, size=2))
    steps = []
    for k in range(int(rng.integers(8, 20))):
        x, y = (int(v) for v in rng.integers(1, 50, size=2))
        steps.append(f"Step {k + 1}: compare {x} with {y}; keep {max(x, y)} and continue.")
    return (f"Question: Ana has {a} coins and Ben has {b} coins. Who has more coins?\n" + "\n".join(steps)
            + f"\nTherefore the answer is {'Ana' if a > b else 'Ben'}.")


def test_same_seed_same_pool_and_different_seed_differs():
    a = generate_pool(300, 0.3, np.random.default_rng(7))
    b = generate_pool(300, 0.3, np.random.default_rng(7))
    c = generate_pool(300, 0.3, np.random.default_rng(8))
    assert json.dumps(a) == json.dumps(b)
    assert [d["text"] for d in a] != [d["text"] for d in c]


def test_pool_fields_ids_and_kinds(pool):
    assert [d["id"] for d in pool] == [f"pool-{i:06d}" for i in range(len(pool))]
    assert all(isinstance(d["text"], str) and d["text"] for d in pool)
    assert all(isinstance(d["safety_score"], int) and 0 <= d["safety_score"] <= 5 for d in pool)
    kinds = Counter(d["meta_kind"] for d in pool)
    assert set(kinds) == {"clean", *NOISE_KINDS}
    assert 0.22 < 1 - kinds["clean"] / len(pool) < 0.38  # noise_fraction 0.3
    for d in pool:
        if d["meta_kind"] == "near_dup":  # copies an EARLIER clean doc of the same register
            src = int(d["meta_dup_of"].split("-")[1])
            assert src < int(d["id"].split("-")[1]) and pool[src]["meta_kind"] == "clean"
            assert d["meta_register"] == pool[src]["meta_register"] and d["text"] != pool[src]["text"]


def test_registers_have_distinct_lengths_and_vocabulary(pool):
    clean = [d for d in pool if d["meta_kind"] == "clean"]
    med = {r: median(len(d["text"].split()) for d in clean if d["meta_register"] == r) for r in REGISTERS}
    assert med["encyclopedic"] > med["news"] > med["qa"] > med["forum"] > 60
    vocab = {r: Counter(w.lower().strip(".,?:") for d in clean if d["meta_register"] == r
                        for w in d["text"].split()) for r in REGISTERS}
    top = {r: {w for w, _ in vocab[r].most_common(300)} for r in REGISTERS}
    assert all(len(vocab[r]) > 250 for r in REGISTERS)
    for r in REGISTERS:  # shared function words only: most frequent words differ by register
        for s in REGISTERS:
            if r < s:
                assert len(top[r] & top[s]) / 300 < 0.35, (r, s)


def test_safety_distribution_depends_on_register(pool):
    mean = {r: np.mean([d["safety_score"] for d in pool if d["meta_register"] == r and d["meta_kind"] == "clean"])
            for r in REGISTERS}
    assert mean["forum"] > mean["news"] > mean["encyclopedic"]


def test_extra_register_and_weights():
    docs = generate_pool(200, 0.0, np.random.default_rng(1), extra_registers={"reasoning": _reasoning},
                         register_weights={"reasoning": 4.0})
    regs = Counter(d["meta_register"] for d in docs)
    assert regs["reasoning"] > 80 and set(regs) == {*REGISTERS, "reasoning"}
    with pytest.raises(PipelineError, match="'news' is a built-in"):
        generate_pool(10, 0.0, np.random.default_rng(1), extra_registers={"news": _reasoning})
    with pytest.raises(PipelineError, match="'bad'"):
        generate_pool(10, 0.0, np.random.default_rng(1), extra_registers={"bad": lambda rng: ""},
                      register_weights={r: 0.0 for r in REGISTERS})


def test_noise_weights_pick_the_kinds_and_off_register_pages_have_their_own_registers():
    docs = generate_pool(400, 0.5, np.random.default_rng(2), noise_weights={"stuffing": 1.0, "off_register": 1.0})
    kinds = Counter(d["meta_kind"] for d in docs)
    assert set(kinds) == {"clean", "stuffing", "off_register"} and kinds["stuffing"] > 60 and kinds["off_register"] > 60
    off = Counter(d["meta_register"] for d in docs if d["meta_kind"] == "off_register")
    assert set(off) == set(OFF_REGISTERS) and not set(off) & set(REGISTERS)
    assert {d["meta_register"] for d in docs if d["meta_kind"] == "stuffing"} == {"noise"}
    again = generate_pool(400, 0.5, np.random.default_rng(2), noise_weights={"stuffing": 1.0, "off_register": 1.0})
    assert again == docs
    with pytest.raises(PipelineError, match="ingest.noise_weights.spam: unknown noise kind"):
        generate_pool(10, 0.5, np.random.default_rng(1), noise_weights={"spam": 1.0})
    with pytest.raises(PipelineError, match="ingest.noise_weights: .*positive sum"):
        generate_pool(10, 0.5, np.random.default_rng(1), noise_weights={"junk": 0.0})


def test_broken_encoding_pages_are_utf8_decoded_as_ascii_with_replacement():
    """A mojibake page is Cyrillic-script text whose UTF-8 bytes were decoded as ASCII with replacement: every
    letter is two U+FFFD, what is left is ASCII (spaces, digits, punctuation), every page carries the artifact
    kind curation.artifacts counts for broken UTF-8, and none passes the alpha_ratio filter the pipeline runs."""
    from decision_pipeline.curation.artifacts import count_artifacts
    from decision_pipeline.curation.filters import alpha_ratio
    docs = [d for d in generate_pool(600, 0.5, np.random.default_rng(4), noise_weights={"mojibake": 1.0})
            if d["meta_kind"] == "mojibake"]
    assert len(docs) > 200
    check = alpha_ratio(0.7)  # params.yaml's curate.filters.alpha_ratio.min
    for d in docs:
        assert count_artifacts(d["text"])[1]["replacement_char"] > 0
        assert all(ch == "\ufffd" or ch.isascii() for ch in d["text"]) and d["text"].count("\ufffd") % 2 == 0
        assert check(d["text"]) == (False, "alpha_ratio")


def test_dev_is_disjoint_from_pool(pool, dev):
    assert Counter(d["register"] for d in dev) == {r: 60 for r in REGISTERS}
    assert not {d["id"] for d in dev} & {d["id"] for d in pool}
    assert not {d["text"] for d in dev} & {d["text"] for d in pool}
    assert len({d["text"] for d in dev}) == len(dev)


def test_dev_redraws_texts_it_must_avoid():
    first = generate_dev(3, ["qa"], np.random.default_rng(5))
    again = generate_dev(3, ["qa"], np.random.default_rng(5), avoid_texts=[first[0]["text"]])
    assert again[0]["text"] != first[0]["text"]


def test_dev_unknown_register_and_extra_dev_register():
    with pytest.raises(PipelineError, match="'poetry' is unknown"):
        generate_dev(2, ["poetry"], np.random.default_rng(0))
    dev = generate_dev({"reasoning": 3, "qa": 1}, ["reasoning", "qa"], np.random.default_rng(0),
                       extra_registers={"reasoning": _reasoning})
    assert [d["id"] for d in dev] == ["dev-reasoning-00000", "dev-reasoning-00001", "dev-reasoning-00002",
                                      "dev-qa-00000"]


@pytest.mark.parametrize("docs, culprit", [
    ([], "empty"),
    ([{"id": "a", "text": "x"}, {"id": "b", "text": None}], "'b'"),
    ([{"id": "a", "text": "x"}, {"id": "b", "text": 3}], "'b'"),
    ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "duplicate id 'a'"),
    ([{"text": "x"}], "#0"),
])
def test_validate_pool_names_culprit(docs, culprit):
    with pytest.raises(PipelineError, match=culprit) as e:
        validate_pool(docs)
    assert "\n" not in str(e.value)


def test_load_jsonl_parquet_and_directory(tmp_path):
    rows = [{"id": f"x{i}", "text": f"text number {i}", "lang": "en"} for i in range(4)]
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps(r) for r in rows[2:]) + "\n\n")
    pd.DataFrame(rows[:2]).to_parquet(tmp_path / "a.parquet")
    (tmp_path / "notes.txt").write_text("ignored")
    docs = load_external_pool(tmp_path)
    assert [d["id"] for d in docs] == ["x0", "x1", "x2", "x3"]  # sorted shard order
    assert docs[3]["lang"] == "en"
    assert [d["id"] for d in load_external_pool(tmp_path / "b.jsonl")] == ["x2", "x3"]
    (tmp_path / "ints.jsonl").write_text('{"id": 7, "text": "seven"}\n')
    assert load_external_pool(tmp_path / "ints.jsonl")[0]["id"] == "7"


@pytest.mark.parametrize("layout", ["subdir", "spark-style"])
def test_a_subdirectory_of_shards_is_refused_by_both_readers(tmp_path, layout):
    """A shard directory is read flat (#53): a subdirectory holding shards (or named like one, as Spark writes)
    is one line naming it, from the ingest reader and the ray engine's alike, never silently skipped."""
    from decision_pipeline.curation.ray_kernels import list_shards

    pd.DataFrame([{"id": "a", "text": "one"}]).to_parquet(tmp_path / "a.parquet")
    nested = tmp_path / ("more" if layout == "subdir" else "b.parquet")
    (nested / "deeper").mkdir(parents=True)
    pd.DataFrame([{"id": "b", "text": "two"}]).to_parquet(nested / "deeper" / "part-0.parquet")
    (tmp_path / "_logs").mkdir()                      # a subdirectory without shards is no shard: left alone
    (tmp_path / "_logs" / "run.txt").write_text("x")
    for read in (load_external_pool, list_shards):
        with pytest.raises(PipelineError) as err:
            read(tmp_path)
        assert str(err.value).startswith(f"{nested}: a subdirectory holding ") and "is not read" in str(err.value)
    (nested / "deeper" / "part-0.parquet").unlink()
    if layout == "subdir":
        assert [d["id"] for d in load_external_pool(tmp_path)] == ["a"]
        assert [Path(s.path).name for s in list_shards(tmp_path)] == ["a.parquet"]
        assert all(Path(s.path).is_absolute() for s in list_shards(tmp_path))


def test_load_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "ok"}\n{"id": "b", "text": \n')
    with pytest.raises(PipelineError, match=r"bad\.jsonl:2: malformed JSON"):
        load_external_pool(bad)
    nofield = tmp_path / "nofield.jsonl"
    nofield.write_text('{"id": "a"}\n')
    with pytest.raises(PipelineError, match=r"nofield\.jsonl:1: expected an object with 'id' and 'text'"):
        load_external_pool(nofield)
    pd.DataFrame({"id": ["a"], "body": ["x"]}).to_parquet(tmp_path / "p.parquet")
    with pytest.raises(PipelineError, match=r"p\.parquet: Parquet shard lacks column 'text'"):
        load_external_pool(tmp_path / "p.parquet")
    with pytest.raises(PipelineError, match="does not exist"):
        load_external_pool(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(PipelineError, match="no \\*.jsonl or \\*.parquet"):
        load_external_pool(empty)
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n')
    with pytest.raises(PipelineError, match="duplicate id 'a'"):
        load_external_pool(dup)


def test_junk_and_off_register_pages_add_little_bpe_vocabulary():
    """The tokenizer stage trains its BPE on the pool, and the model's output layer is as wide as that vocabulary:
    the junk and off-register pages are built from the clean registers' own words (their new entries are mostly
    the old pool's banner lines, symbols and stubs, and the shop pages' few goods, brands and adjectives), so
    noise widens the model little. Measured: 3,074 entries on the clean documents of this pool, 3,407 on all of
    it (x1.11; the old generator's noise at this share: x1.07); with the page vocabularies of a first design
    (navigation, brand, product and material words, cp1252 mojibake) the default pool's BPE filled its 4,096 cap
    where the old pool stopped at 3,551."""
    import dataclasses
    from decision_pipeline.lm.bpe import train_pipeline_tokenizer
    from decision_pipeline.lm.params import TokenizerParams
    from tests.micro import micro_params
    tp = dataclasses.replace(micro_params(TokenizerParams, "tokenizer"), vocab_size=20_000)  # uncapped
    docs = generate_pool(3000, 0.55, np.random.default_rng(3))
    clean, _ = train_pipeline_tokenizer([d["text"] for d in docs if d["meta_kind"] == "clean"], [], tp)
    whole, _ = train_pipeline_tokenizer([d["text"] for d in docs], [], tp)
    assert len(whole) <= 1.14 * len(clean), (len(clean), len(whole))
