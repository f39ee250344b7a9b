"""The preflight: every outside input of a profile checked at once, one line per failure, nothing written."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from decision_pipeline.preflight.checks import (check_endpoint, check_plan, check_reviews, check_s1mb,
                                                check_torch, load_tokenizer, preflight, tokenizer_problems)

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "qwen3_4b"


def _tree(path: Path) -> list[tuple[str, int]]:
    return sorted((str(p), p.stat().st_mtime_ns) for p in path.rglob("*")) if path.exists() else []


def test_gpu_profile_on_this_cpu_machine_lists_all_and_writes_nothing():
    before = (_tree(ROOT / "data"), _tree(ROOT / "models"))
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "decision_pipeline", "preflight", "check", "--profile", "gpu"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    took = time.monotonic() - start
    assert run.returncode == 2 and took < 60
    lines = run.stderr.splitlines()
    assert any(line.startswith("torch: ") and "make gpu-install" in line for line in lines)
    assert any(line.startswith("base_model.path: ") for line in lines)
    assert any(line.startswith("s1mb_data.local_dir: ") for line in lines)
    assert lines[-1].startswith("check: ") and f"{len(lines) - 1} problem(s)" in lines[-1]
    assert (_tree(ROOT / "data"), _tree(ROOT / "models")) == before


@pytest.fixture
def model_dir(tiny_dir, tmp_path) -> Path:
    d = tmp_path / "model"
    shutil.copytree(tiny_dir, d)
    return d


def test_tiny_tokenizer_passes(model_dir):
    tok, errs = load_tokenizer(str(model_dir), "base_model.path")
    assert errs == [] and tokenizer_problems(tok, "base_model.path") == []


def test_model_dir_without_tokenizer(model_dir):
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt"):
        (model_dir / name).unlink(missing_ok=True)
    tok, errs = load_tokenizer(str(model_dir), "base_model.path")
    assert tok is None and len(errs) == 1
    assert errs[0].startswith("base_model.path: ") and "tokenizer" in errs[0]


def _drop_special(model_dir: Path, *names: str) -> None:
    cfg_path = model_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    for name in names:
        cfg[name] = None
    cfg_path.write_text(json.dumps(cfg))
    (model_dir / "special_tokens_map.json").unlink(missing_ok=True)


def test_tokenizer_without_pad(model_dir):
    """No pad and no fallback (no eos): one line; with an eos the stages' fallback pads with it."""
    _drop_special(model_dir, "pad_token")
    tok, _ = load_tokenizer(str(model_dir), "base_model.path")
    assert tok.pad_token_id is not None and tokenizer_problems(tok, "base_model.path") == []   # eos fallback
    # no eos and no ChatML template (which would give the <|im_end|> fallback): nothing to pad with
    _drop_special(model_dir, "pad_token", "eos_token", "chat_template")
    (model_dir / "chat_template.jinja").unlink(missing_ok=True)
    tok, _ = load_tokenizer(str(model_dir), "base_model.path")
    assert tok.pad_token_id is None
    errs = [e for e in tokenizer_problems(tok, "base_model.path") if "chat_template" not in e]
    assert len(errs) == 1 and errs[0].startswith("base_model.path: no pad token") and "pad_token" in errs[0]


def test_think_close_split(model_dir):
    path = model_dir / "tokenizer.json"
    data = json.loads(path.read_text())
    for tok in data["added_tokens"]:
        if tok["content"] == "</think>":
            tok["content"] = "</reasoning>"
    data["model"]["vocab"].pop("</think>", None)
    path.write_text(json.dumps(data))
    cfg_path = model_dir / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    for entry in cfg.get("added_tokens_decoder", {}).values():
        if entry.get("content") == "</think>":
            entry["content"] = "</reasoning>"
    cfg_path.write_text(json.dumps(cfg))
    tok, _ = load_tokenizer(str(model_dir), "base_model.path")
    assert len(tok.encode("</think>", add_special_tokens=False)) > 1
    errs = tokenizer_problems(tok, "base_model.path")
    assert len(errs) == 1 and errs[0].startswith("base_model.path: '</think>' is")
    assert "base_model.add_think_tokens" in errs[0]


class _Server:
    """A local OpenAI-style endpoint: /v1/models and vLLM's /tokenize answering with `ids_for(text)`."""

    def __init__(self, ids_for):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, obj):
                body = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send({"object": "list", "data": [{"id": "teacher", "object": "model"}]})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, req))
                self._send({"tokens": ids_for(req["prompt"]), "count": 0})

        self.requests: list = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_endpoint_with_another_tokenizer(tiny):
    _, tok = tiny
    same = _Server(lambda text: tok.encode(text, add_special_tokens=False))
    other = _Server(lambda text: [i + 1 for i in tok.encode(text, add_special_tokens=False)])
    try:
        assert check_endpoint("generate.teacher_base_url", same.url, "teacher", tok) == []
        assert same.requests[0][0] == "/tokenize" and same.requests[0][1]["model"] == "teacher"
        errs = check_endpoint("generate.teacher_base_url", other.url, "teacher", tok)
        assert len(errs) == 1 and errs[0].startswith("generate.teacher_base_url: ")
        assert "serve a teacher with the base model's tokenizer" in errs[0]
        wrong_name = check_endpoint("judge.base_url", same.url, "judge")
        assert len(wrong_name) == 1 and "not 'judge'" in wrong_name[0]
    finally:
        same.close()
        other.close()


def test_endpoint_down_is_one_line():
    errs = check_endpoint("judge.base_url", "http://127.0.0.1:9/v1", "judge")
    assert len(errs) == 1 and errs[0].startswith("judge.base_url: ") and "did not answer" in errs[0]


def test_plan_over_budget_in_preflight():
    from decision_pipeline.preflight.profile import profile_params
    params = profile_params("gpu", ROOT)
    errs = check_plan(params, 8, str(FIXTURE))
    assert errs and all(e.startswith("memory plan: stage ") for e in errs)


def test_gpu_profile_on_cpu_only_torch():
    import torch
    params = {"runtime": {"device": "cuda"}, "generate": {"backend": "hf"}}
    errs = check_torch(params, cuda_available=lambda: False)
    if torch.version.cuda:   # a CUDA build that sees no GPU (faked above) is named as such
        assert errs == [] or "sees no GPU" in errs[0]
    else:
        assert len(errs) == 1 and errs[0].startswith(f"torch: {torch.__version__} is a CPU-only build")
        assert "make gpu-install" in errs[0]
    assert check_torch({"runtime": {"device": "cpu"}, "generate": {"backend": "hf"}}) == []


def test_s1mb_layout_and_reviews(tmp_path):
    p = {"s1mb_data": {"source": "local", "local_dir": str(tmp_path / "s1mb"), "category": "english-v1"},
         "reviews": {"source": "import", "import_path": "export.jsonl"}}
    (tmp_path / "s1mb" / "benchmarks").mkdir(parents=True)
    errs = check_s1mb(p)
    assert len(errs) == 1 and "lacks datasets, categories/english-v1.json" in errs[0]
    (tmp_path / "s1mb" / "datasets").mkdir()
    (tmp_path / "s1mb" / "categories").mkdir()
    (tmp_path / "s1mb" / "categories" / "english-v1.json").write_text("{}")
    assert check_s1mb(p) == []
    assert "not found" in check_reviews(p, tmp_path)[0]
    (tmp_path / "export.jsonl").write_text('{"id": 1}\n[1]\n')
    assert check_reviews(p, tmp_path) == [f"reviews.import_path: {tmp_path / 'export.jsonl'}:2 is not a JSON object; "
                                          "re-export with `make review-export`"]


def test_all_failures_listed_at_once(tmp_path, model_dir):
    (model_dir / "tokenizer.json").unlink()
    params = {"runtime": {"device": "cpu"}, "base_model": {"source": "path", "path": str(model_dir)},
              "generate": {"backend": "hf", "teacher": "openai", "teacher_base_url": "http://127.0.0.1:9/v1",
                           "teacher_model": "teacher"},
              "s1mb_data": {"source": "local", "local_dir": str(tmp_path / "none"), "category": "c"},
              "reviews": {"source": "import", "import_path": "missing.jsonl"}}
    errs = preflight(params, tmp_path, 80)
    keys = [e.split(":")[0] for e in errs]
    assert keys == ["base_model.path", "generate.teacher_base_url", "s1mb_data.local_dir", "reviews.import_path"]


def test_gpu_install_verification_fails_loudly_on_this_cpu_torch():
    import torch
    run = subprocess.run([sys.executable, "-m", "decision_pipeline", "gpu-env"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    if torch.version.cuda and torch.cuda.is_available():
        pytest.skip("a CUDA torch with a GPU: the CPU-torch refusal cannot be shown here")
    assert run.returncode == 2
    assert run.stderr.splitlines()[0].startswith(f"torch: {torch.__version__}")


def _params_with_base(tmp_path: Path, model_dir: Path, **generate) -> Path:
    """params.yaml of the default profile with the base model taken from `model_dir` (and generate overrides)."""
    import yaml
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["base_model"].update(source="path", path=str(model_dir))
    params["generate"].update(generate)
    out = tmp_path / "params.yaml"
    out.write_text(yaml.safe_dump(params, sort_keys=False))
    return out


def _check_main(argv: list[str], capsys, monkeypatch) -> subprocess.CompletedProcess:
    """`python -m decision_pipeline preflight check ...` as its `main(argv)` in this process, exit code and
    output captured: the same code without a fresh interpreter importing torch and transformers (~7 s of CPU
    each); the weightless case and the gpu-profile run above go through the real entry point."""
    from decision_pipeline.preflight.cli import main
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    rc = main(argv)
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["preflight", *argv], rc, out.out, out.err)


@pytest.mark.parametrize("damage", ["weightless", "truncated"])
def test_cli_refuses_a_weightless_or_truncated_model_directory_in_seconds(tmp_path, model_dir, damage, capsys,
                                                                          monkeypatch):
    """#33.3 must-show: `make preflight` (this CLI) refuses the directory with one line naming the file and
    what to do, exit 2, before any stage runs; nothing is written. The weightless case runs the CLI as a
    fresh process (the seconds include importing torch and transformers); the truncated one runs the same
    CLI's `main(argv)` in this process."""
    weights = model_dir / "model.safetensors"
    if damage == "weightless":
        weights.unlink()
    else:
        weights.write_bytes(weights.read_bytes()[:-4096])
    params = _params_with_base(tmp_path, model_dir)
    before = _tree(model_dir), _tree(ROOT / "models")
    start = time.monotonic()
    argv = ["check", "--params", str(params), "--gpu-gib", "80"]
    if damage == "weightless":
        run = subprocess.run([sys.executable, "-m", "decision_pipeline", "preflight", *argv], capture_output=True,
                             text=True, cwd=ROOT, timeout=120)
    else:
        run = _check_main(argv, capsys, monkeypatch)
    took = time.monotonic() - start
    lines = run.stderr.splitlines()
    assert run.returncode == 2 and len(lines) == 2 and "Traceback" not in run.stderr, run.stderr
    expected = (f"base_model.path: {model_dir}: no weights (model.safetensors" if damage == "weightless" else
                f"base_model.path: {weights}: truncated: the header says the data runs to byte")
    assert lines[0].startswith(expected) and ("copy the model's weight files" in lines[0] or
                                              "copy model.safetensors again" in lines[0])
    assert lines[1].startswith("check: 1 problem(s)")
    assert took < 60   # seconds on a 2-core CI box, most of it importing torch and transformers
    assert (_tree(model_dir), _tree(ROOT / "models")) == before


def test_weights_of_every_model_directory_the_profile_names(tmp_path, model_dir):
    from decision_pipeline.preflight.checks import check_weights, weight_dirs
    cand = {"kind": "endpoint", "serve_model": str(tmp_path / "absent")}
    params = {"base_model": {"source": "path", "path": str(model_dir)},
              "reflect": {"candidates": {"local": cand, "made_here": {"kind": "endpoint", "serve_model": "models/base"},
                                         "ref": {"kind": "reference", "serve_model": ""}}}}
    assert [k for k, _, _ in weight_dirs(params)] == ["base_model.path", "reflect.candidates.local.serve_model"]
    assert check_weights(params) == [f"reflect.candidates.local.serve_model: {tmp_path / 'absent'} is no model "
                                     "directory (no config.json); put the Hugging Face model directory there or fix "
                                     "reflect.candidates.local.serve_model"]
    cand["serve_model"] = str(model_dir)
    assert check_weights(params) == []
    cfg = json.loads((model_dir / "config.json").read_text())
    (model_dir / "config.json").write_text(json.dumps({**cfg, "hidden_size": cfg["hidden_size"] * 2}))
    errs = check_weights(params)
    assert [e.split(":")[0] for e in errs] == ["base_model.path", "reflect.candidates.local.serve_model"]
    assert all("model.embed_tokens.weight has shape" in e for e in errs)
    params["base_model"]["path"] = str(tmp_path / "nowhere")  # the tokenizer check already names it: no 2nd line
    assert [e.split(":")[0] for e in check_weights(params)] == ["reflect.candidates.local.serve_model"]


class _Nonsense:
    """An endpoint answering with valid HTTP and malformed JSON: GET -> `models`, POST /tokenize -> `tokens`."""

    def __init__(self, models, tokens):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, obj):
                body = json.dumps(obj).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send(models)

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self._send(tokens)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


GOOD_MODELS = {"object": "list", "data": [{"id": "teacher"}]}


@pytest.mark.parametrize("models,tokens,needle", [
    ([{"id": "teacher"}], None, "/v1/models: malformed reply: the reply is [{\"id\": \"teacher\"}], expected a JSON object"),
    ({"data": "teacher"}, None, "/v1/models: malformed reply: field data is \"teacher\", expected a list"),
    ({"data": [{"name": "teacher"}]}, None, "field data[0].id is null, expected a string"),
    (GOOD_MODELS, {"tokens": ["a", "b"]}, "/tokenize: malformed reply: field tokens[0] is \"a\", expected a token id"),
    (GOOD_MODELS, {"tokens": [1, 2.5]}, "field tokens[1] is 2.5, expected a token id"),
    (GOOD_MODELS, {"count": 3}, "field tokens is null, expected a list"),
    (GOOD_MODELS, ["x"], "/tokenize: malformed reply: the reply is [\"x\"], expected a JSON object"),
])
def test_malformed_endpoint_replies_are_one_line_naming_the_field(tiny, models, tokens, needle):
    """#33.4: /v1/models and /tokenize replies go through the schema in the preflight (they were
    AttributeError/ValueError tracebacks)."""
    _, tok = tiny
    server = _Nonsense(models, tokens)
    try:
        errs = check_endpoint("generate.teacher_base_url", server.url, "teacher", tok)
    finally:
        server.close()
    assert len(errs) == 1 and errs[0].startswith("generate.teacher_base_url: http://127.0.0.1:") and needle in errs[0]
    assert "fix generate.teacher_base_url" in errs[0] or "vLLM's /tokenize" in errs[0]


def test_cli_malformed_teacher_is_exit_2_one_line(tmp_path, tiny_dir, capsys, monkeypatch):
    server = _Nonsense([{"id": "teacher"}], None)
    try:
        params = _params_with_base(tmp_path, Path(tiny_dir), teacher="openai", teacher_base_url=server.url,
                                   teacher_model="teacher")
        run = _check_main(["check", "--params", str(params), "--gpu-gib", "80"], capsys, monkeypatch)
    finally:
        server.close()
    lines = run.stderr.splitlines()
    assert run.returncode == 2 and "Traceback" not in run.stderr and len(lines) == 2, run.stderr
    assert lines[0].startswith(f"generate.teacher_base_url: {server.url}/models: malformed reply: the reply is "
                               '[{"id": "teacher"}], expected a JSON object')
