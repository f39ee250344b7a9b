"""Dataset rows -> cases -> per-benchmark decisions (spec §3.1-3.2) and definitions (§2)."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.bench.s1mb_helpers import criterion, dataset_row, decision_row, definition, mixed_row, target_row

from decision_pipeline.bench.s1mb import (
    S1MBError, benchmark_decisions, case_from_row, cases_for_benchmark, dump_benchmark,
    load_benchmarks, load_cases, load_category, parse_benchmark, read_rows,
)


def test_row_conversion_keeps_authored_order_and_renders_structured_text():
    case = case_from_row(mixed_row("c1"))
    label, relevant, quality = case.questions
    assert label.option_ids == ("b", "a")                  # criterion order, not target order
    assert label.options[0].description == '{"label":"B"}'  # compact JSON, sorted keys
    assert label.options[1].description == "A"              # a JSON string is used as-is
    assert quality.options[1].description == '["High"]'
    assert quality.options[1].value == 4.0 and isinstance(quality.options[1].value, float)
    assert case.targets["quality"].probabilities == {"hi": 0.75, "lo": 0.25}
    assert case.targets["quality"].kind == "soft"
    assert case.input_hash == "h-c1" and case.state == {"query": "c1"}
    struct = decision_row("d", "choice", [criterion("x", "X"), criterion("y", "Y")],
                          instructions={"task": "Pick", "a": [1]})
    row = dataset_row("c2", [struct], [target_row("d", {"y": 1.0, "x": 0.0})])
    assert case_from_row(row).questions[0].instructions == '{"a":[1],"task":"Pick"}'


def test_benchmark_keeps_only_its_task_and_checks_counts():
    rows = [mixed_row("c1"), mixed_row("c2"),
            dataset_row("c3", [decision_row("only", "choice", [criterion("a", "A"), criterion("b", "B")])],
                        [target_row("only", {"a": 1.0, "b": 0.0})])]
    cases = [case_from_row(r) for r in rows]
    noul_cases = cases_for_benchmark(definition("s-noul-test-v1", "noul", 2, 2), cases)
    assert [c.case_id for c in noul_cases] == ["c1", "c2"]        # c3 has no noul question
    assert all(q.task == "noul" for c in noul_cases for q in c.questions)
    decisions = benchmark_decisions(definition("s-choice-test-v1", "choice", 3, 3), cases)
    assert [(d.case_id, d.question_id) for d in decisions] == [("c1", "label"), ("c2", "label"), ("c3", "only")]
    with pytest.raises(S1MBError, match="dataset has 2 cases / 2 noul decisions but the definition says 2 / 3") as err:
        cases_for_benchmark(definition("s-noul-test-v1", "noul", 2, 3), cases)
    assert "benchmark 's-noul-test-v1'" in str(err.value)


@pytest.mark.parametrize("change, problem", [
    (lambda r: r["input"]["decisions"][0].update(kind="ranking"), "is not 'judgment'"),
    (lambda r: r["input"]["decisions"][0]["criteria"].append(criterion("a", "dup")), "duplicate criterion ids"),
    (lambda r: r["targets"].pop(), "exactly one target"),
    (lambda r: r["input"]["decisions"][1]["criteria"][1].update(id="yes"), "exactly 'false' and 'true'"),
    (lambda r: r["input"]["decisions"][2]["criteria"][1].update(value=0), "all equal"),
    (lambda r: r["input"]["decisions"][2]["criteria"][1].update(value=None), "no numeric value"),
    (lambda r: r["targets"][2].update(probabilities=[0.6, 0.6]), "target probabilities sum"),
    (lambda r: r.update(split="train"), "split 'train'"),
    (lambda r: r["input"]["decisions"][0].update(documents=["doc"]), "empty documents"),
])
def test_invalid_rows_are_rejected_with_location(change, problem):
    row = mixed_row("c-7")
    change(row)
    with pytest.raises(S1MBError, match=problem) as err:
        case_from_row(row)
    assert "case 'c-7'" in str(err.value)


def test_read_rows_from_parquet_jsonl_and_arrow(tmp_path):
    rows = [mixed_row("c1", t_true=1.0), mixed_row("c2", t_true=0.0, label="b")]
    parquet_dir = tmp_path / "data" / "datasets" / "pq"
    parquet_dir.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), parquet_dir / "test-00000.parquet")
    jsonl_dir = tmp_path / "data" / "datasets" / "js" / "test"
    jsonl_dir.mkdir(parents=True)
    (jsonl_dir / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    arrow_dir = tmp_path / "arrow"
    arrow_dir.mkdir()
    table = pa.Table.from_pylist(rows)
    with pa.ipc.new_stream(str(arrow_dir / "data-00000-of-00001.arrow"), table.schema) as writer:
        writer.write_table(table)
    for directory in (parquet_dir, jsonl_dir.parent, arrow_dir):
        cases = [case_from_row(r) for r in read_rows(directory)]
        assert [c.case_id for c in cases] == ["c1", "c2"]
        assert cases[1].targets["label"].probabilities == {"a": 0.0, "b": 1.0}
        assert cases[0].questions[2].options[0].value == 0.0
    cases = load_cases(tmp_path / "data", definition("pq-score-test-v1", "score", 2, 2, subset="pq"))
    assert [q.task for c in cases for q in c.questions] == ["score", "score"]


def test_definition_files_round_trip_and_reject_bad_fields(tmp_path):
    obj = {"id": "example-subset-score-test-v1", "task": "score", "dataset": "datasets/example_subset",
           "split": "test", "case_count": 40, "decision_count": 55,
           "primary_metric": "normalized_expected_score_mae"}
    text = dump_benchmark(parse_benchmark(obj))
    assert text == json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
    (tmp_path / f"{obj['id']}.json").write_text(text)
    definitions = load_benchmarks(tmp_path)
    assert definitions[obj["id"]].decision_count == 55
    for bad, problem in [({**obj, "extra": 1}, "unexpected \\['extra'\\]"),
                         ({**obj, "primary_metric": "binary_brier"}, "primary_metric"),
                         ({**obj, "split": "train"}, "split"),
                         ({**obj, "dataset": "datasets/../etc"}, "dataset"),
                         ({**obj, "case_count": 0}, "case_count"),
                         ({**obj, "task": "rank"}, "task")]:
        with pytest.raises(S1MBError, match=problem):
            parse_benchmark(bad)
    (tmp_path / "wrong-name.json").write_text(text)
    with pytest.raises(S1MBError, match="differs from file name"):
        load_benchmarks(tmp_path)
    category = tmp_path / "smoke-v1.json"
    category.write_text(json.dumps({"id": "smoke-v1", "name": "Smoke", "description": "",
                                    "benchmarks": [obj["id"], "missing-noul-test-v1"]}))
    with pytest.raises(S1MBError, match="no definition for benchmarks \\['missing-noul-test-v1'\\]"):
        load_category(category, definitions)
