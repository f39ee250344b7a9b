from decision_pipeline.common.fingerprint import model_fingerprint, run_fingerprint


def test_model_fingerprint_changes_with_weights_only(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"abc")
    (tmp_path / "tokenizer.json").write_text("x")
    before = model_fingerprint(tmp_path)
    (tmp_path / "tokenizer.json").write_text("y")
    assert model_fingerprint(tmp_path) == before
    (tmp_path / "model.safetensors").write_bytes(b"abd")
    assert model_fingerprint(tmp_path) != before


def test_run_fingerprint_is_order_stable_for_dicts():
    assert run_fingerprint({"a": 1, "b": 2}, 3) == run_fingerprint({"b": 2, "a": 1}, 3)
    assert run_fingerprint({"a": 1}, 3) != run_fingerprint({"a": 1}, 4)
