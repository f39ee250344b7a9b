"""One resume scheme: run-control marks on the params classes, claim, last complete step."""
from __future__ import annotations

from decision_pipeline.common.workdir import claim, content_params, last_step, run_control_fields
from decision_pipeline.decision.generate.generation import GenerateParams
from decision_pipeline.decision.rl.config import RLParams
from decision_pipeline.decision.sft.config import SFTParams
from decision_pipeline.lm.training import PretrainParams


def test_run_control_is_marked_on_each_class_that_resumes():
    """The knobs that may change under a resumable run, read from the dataclasses (one definition)."""
    assert run_control_fields(PretrainParams) == {"threads", "save_steps", "launch"}
    assert run_control_fields(SFTParams) == {"threads", "save_steps", "gradient_checkpointing", "loss_chunk_tokens"}
    assert run_control_fields(RLParams) == {"threads", "save_steps", "gradient_checkpointing",
                                            "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode"}
    assert run_control_fields(GenerateParams) == {"deadline_minutes", "teacher_token_cap", "teacher_usd_per_mtok_in",
                                                  "teacher_usd_per_mtok_out", "concurrency", "teacher_timeout_s",
                                                  "teacher_deadline_s", "threads", "workers", "engine", "ray"}


def test_content_params_drop_exactly_the_run_control_fields():
    import dataclasses

    from tests.decision.test_rl_memory_knobs import _params
    p = _params()
    content = content_params(p)
    assert set(content) == {f.name for f in dataclasses.fields(p)} - run_control_fields(RLParams)
    assert content_params(dataclasses.replace(p, threads=p.threads + 1)) == content
    assert content_params(dataclasses.replace(p, lr=p.lr * 2)) != content


def test_claim_resumes_only_the_same_run_and_names_what_changed(tmp_path, capsys):
    work = tmp_path / "w"
    assert claim(work, {"params": "a", "data": "d"}, "sft") is False
    (work / "checkpoint-5").mkdir()
    assert claim(work, {"params": "a", "data": "d"}, "sft") is True and (work / "checkpoint-5").is_dir()
    assert claim(work, {"params": "b", "data": "d"}, "sft") is False
    assert not (work / "checkpoint-5").exists()
    assert "changed: params" in capsys.readouterr().err
    assert claim(tmp_path / "one", "hash") is False and claim(tmp_path / "one", "hash") is True


def test_last_step_counts_only_sealed_checkpoints(tmp_path):
    for step, sealed in ((4, True), (8, True), (12, False)):
        (tmp_path / f"checkpoint-{step}").mkdir()
        if sealed:
            (tmp_path / f"checkpoint-{step}" / "complete").write_text("x")
    (tmp_path / "checkpoint-tmp").mkdir()
    assert last_step(tmp_path, "complete") == 8
    assert last_step(tmp_path / "none", "complete") == 0
