"""The preflight: everything a profile needs from outside the repository, checked in seconds, all at once.

Why all at once: a GPU run otherwise finds its missing model directory, S1MB export or endpoint
one at a time, each after hours of pretraining. Every check returns failure lines (key: what is
wrong; what to do) instead of raising, so one run lists them all. Nothing is written anywhere:
tokenizers load from their directories only (no weights), weight files are read up to the end of
their headers (`lm.weights`), endpoints get a GET and a tokenize call whose replies go through the
schemas of `lm.replies`.
"""
from __future__ import annotations

import http.client
import importlib.metadata
import importlib.util
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.lm.replies import ReplyError, Schema, models_reply, parse_json, tokenize_reply
from decision_pipeline.questions.schema import ANSWER_PREFIX, LABELS, THINK_CLOSE, THINK_OPEN
from decision_pipeline.preflight.plan import _get, failures, memory_plan, read_shape

VLLM_VERSION = "0.31.0"
TORCH_VERSION = "2.13.0"
ENDPOINT_TIMEOUT_S = 3.0
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model")
PROBE_TEXT = f"{THINK_OPEN}\nThe second option fits.\n{THINK_CLOSE}\n{ANSWER_PREFIX} B"


def uses_vllm(params: dict) -> bool:
    """Whether any stage of the profile builds a vLLM engine."""
    return "vllm" in {_get(params, "generate.backend", "hf"), _get(params, "evaluate.answering.backend", "hf"),
                      _get(params, "rl_probe.backend", "hf")} or bool(_get(params, "rl.use_vllm", False))


def wants_cuda(params: dict) -> bool:
    """A profile needs a CUDA torch when it names cuda, uses vLLM, or is the gpu profile."""
    return (_get(params, "runtime.device", "auto") == "cuda" or uses_vllm(params)
            or _get(params, "base.profile", "") == "gpu")


def check_torch(params: dict, cuda_available: Callable[[], bool] | None = None) -> list[str]:
    """CUDA torch of the pinned version, and vLLM of the pinned version where a backend is vllm."""
    import torch
    out = []
    if wants_cuda(params):
        available = (cuda_available or torch.cuda.is_available)()
        if not torch.version.cuda or not available:
            why = "a CPU-only build" if not torch.version.cuda else "a CUDA build that sees no GPU"
            out.append(f"torch: {torch.__version__} is {why} and this profile needs a GPU; run `make gpu-install` "
                       "(requirements-gpu.txt) on a machine with an NVIDIA driver")
        elif not torch.__version__.startswith(TORCH_VERSION):
            out.append(f"torch: {torch.__version__} installed, vllm {VLLM_VERSION} needs {TORCH_VERSION}; "
                       "run `make gpu-install`")
    if uses_vllm(params):
        try:
            version = importlib.metadata.version("vllm") if importlib.util.find_spec("vllm") else None
        except importlib.metadata.PackageNotFoundError:
            version = None
        if version != VLLM_VERSION:
            out.append(f"vllm: {'not installed' if version is None else version} but a backend is vllm "
                       f"(generate/evaluate/rl_probe backend, rl.use_vllm); run `make gpu-install` "
                       f"(vllm=={VLLM_VERSION}) or set those backends to hf")
    return out


def tokenizer_problems(tok: Any, key: str) -> list[str]:
    """`lm.tokenizer_checks.check_tokenizer` (single-token think markers and labels, a pad token after the
    pipeline's fallback), plus a chat template that keeps the `Answer: X` line of an answer."""
    from decision_pipeline.lm.tokenizer_checks import check_tokenizer
    out = [f"{key}: {problem}" for problem in check_tokenizer(tok)]
    if not getattr(tok, "chat_template", None):
        out.append(f"{key}: tokenizer has no chat_template; use an instruct model directory")
    else:
        try:
            text = tok.apply_chat_template([{"role": "user", "content": "Q?"}, {"role": "assistant",
                                            "content": PROBE_TEXT}], tokenize=False)
        except Exception as exc:  # noqa: BLE001 - any template error is the user's to fix
            out.append(f"{key}: chat template failed to render ({type(exc).__name__}: {exc}); fix chat_template")
        else:
            if f"{ANSWER_PREFIX} B" not in text:
                out.append(f"{key}: chat template drops the '{ANSWER_PREFIX} X' line of an answer; fix chat_template")
    return out


def load_tokenizer(path: str, key: str) -> tuple[Any, list[str]]:
    """config.json and the tokenizer of a model directory, loaded as the stages load it (pad fallback
    included) but without weights; (tokenizer or None, failure lines)."""
    from decision_pipeline.lm import bpe
    root = Path(path).expanduser()
    if not root.is_dir():
        return None, [f"{key}: {root} is not a directory; put the Hugging Face model directory there or fix {key}"]
    if not (root / "config.json").is_file():
        return None, [f"{key}: {root} has no config.json; point {key} at a Hugging Face model directory"]
    if not any((root / f).is_file() for f in TOKENIZER_FILES):
        return None, [f"{key}: {root} has no tokenizer ({' or '.join(TOKENIZER_FILES)}); copy the model's "
                      "tokenizer files into the directory"]
    try:
        return bpe.load_tokenizer(root), []
    except PipelineError as exc:
        return None, [f"{key}: {exc}"]
    except Exception as exc:  # noqa: BLE001 - a broken tokenizer file is the user's to fix
        return None, [f"{key}: {root} has no loadable tokenizer ({type(exc).__name__}); copy tokenizer.json and "
                      "tokenizer_config.json into the model directory"]


def _http_json(url: str, schema: Schema, body: dict | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=ENDPOINT_TIMEOUT_S) as resp:  # noqa: S310 - local endpoints
        return parse_json(resp.read(), schema)


def endpoint_encoder(key: str, base_url: str, model: str) -> Callable[[str], list[int]]:
    """Text -> ids as the server's tokenizer cuts it (vLLM's `POST /tokenize` at the server root, beside /v1);
    an unreachable route or a malformed reply is a PipelineError naming `key`."""
    root = base_url.rstrip("/").removesuffix("/v1")
    schema = Schema(f"{root}/tokenize", f"the teacher must expose vLLM's /tokenize (fix {key} or the server)")

    def encode(text: str) -> list[int]:
        try:
            reply = _http_json(f"{root}/tokenize", schema, {"model": model, "prompt": text, "add_special_tokens": False})
        except (OSError, http.client.HTTPException) as exc:
            raise PipelineError(f"{root}/tokenize did not return tokens ({getattr(exc, 'reason', exc)}); the teacher "
                                "must expose vLLM's /tokenize so its tokenizer can be compared with the base's") from None
        return tokenize_reply(reply, schema)
    return encode


def check_endpoint(key: str, base_url: str, model: str = "", base_tok: Any = None) -> list[str]:
    """GET /v1/models answers with a model listing that has `model`; with `base_tok`, the endpoint's /tokenize
    gives the base's ids for a probe. Malformed replies are one line naming the field (`lm.replies`)."""
    url = base_url.rstrip("/")
    schema = Schema(f"{url}/models", f"fix {key} (an OpenAI-compatible /v1 URL) or the server")
    try:
        served = models_reply(_http_json(f"{url}/models", schema), schema)
    except ReplyError as exc:
        return [f"{key}: {exc}"]
    except (OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        return [f"{key}: {url}/models did not answer ({reason}); start the server (docs/gpu.md 'What to supply') "
                f"or fix {key}"]
    if model and model not in served:
        return [f"{key}: {url} serves {served or 'no models'}, not {model!r}; fix the model name or the server"]
    if base_tok is None:
        return []
    from decision_pipeline.lm.tokenizer_checks import compare_tokenizers
    encode = endpoint_encoder(key, url, model or (served[0] if served else ""))
    try:
        return [f"{key}: {p}" for p in compare_tokenizers(base_tok, None, encode, name="the endpoint's")]
    except PipelineError as exc:
        return [f"{key}: {exc}"]


def check_s1mb(params: dict) -> list[str]:
    """The local S1MB export's layout: benchmarks/, categories/<category>.json, datasets/."""
    if _get(params, "s1mb_data.source", "") != "local":
        return []
    root = Path(str(_get(params, "s1mb_data.local_dir", ""))).expanduser()
    category = _get(params, "s1mb_data.category", "")
    missing = [p for p in ("benchmarks", "datasets") if not (root / p).is_dir()]
    if not (root / "categories" / f"{category}.json").is_file():
        missing.append(f"categories/{category}.json")
    if missing:
        return [f"s1mb_data.local_dir: {root} lacks {', '.join(missing)}; build the S1MB export there "
                "(docs/gpu.md 'What to supply') or fix s1mb_data.local_dir"]
    return []


def check_reviews(params: dict, root: Path) -> list[str]:
    """The imported reviews export exists and every line is a JSON object."""
    if _get(params, "reviews.source", "") != "import":
        return []
    path = root / str(_get(params, "reviews.import_path", ""))
    if not path.is_file():
        return [f"reviews.import_path: {path} not found; run `make review-ui` then `make review-export`, "
                "or set reviews.source: seeded"]
    from decision_pipeline.common.textfile import read_text
    try:
        text = read_text(path)  # the import's encoding rule: a BOM, UTF-16 or a bad byte is named, not a traceback
    except PipelineError as exc:
        return [f"reviews.import_path: {exc}"]
    for n, line in enumerate(text.splitlines(), 1):
        try:
            ok = isinstance(json.loads(line), dict) if line.strip() else True
        except ValueError:
            ok = False
        if not ok:
            return [f"reviews.import_path: {path}:{n} is not a JSON object; re-export with `make review-export`"]
    return []


def check_models(params: dict) -> tuple[Any, list[str]]:
    """Base model directory and served candidates' tokenizers; returns the base tokenizer for the endpoints."""
    out, base_tok = [], None
    if _get(params, "base_model.source", "") == "path":
        base_tok, errs = load_tokenizer(str(_get(params, "base_model.path", "")), "base_model.path")
        out += errs
        if base_tok is not None:
            if _get(params, "base_model.add_think_tokens", False):   # the stage adds them: check the result
                from decision_pipeline.lm.tokenizer_checks import add_think_tokens
                add_think_tokens(None, base_tok)
            out += tokenizer_problems(base_tok, "base_model.path")
    for name, c in (_get(params, "reflect.candidates", {}) or {}).items():
        if isinstance(c, dict) and c.get("kind") == "endpoint" and c.get("tokenizer"):
            out += load_tokenizer(c["tokenizer"], f"reflect.candidates.{name}.tokenizer")[1]
    return base_tok, out


def weight_dirs(params: dict) -> list[tuple[str, str, bool]]:
    """(key, directory, reported elsewhere when absent) of every model directory a stage loads weights from
    that the profile names: the base model (source: path; its missing directory or config.json is already
    a tokenizer line) and the served reflection candidates (`serve_model`) that are no pipeline output
    (`models/...` and `data/...` are made by earlier stages, after the preflight)."""
    out = []
    if _get(params, "base_model.source", "") == "path":
        out.append(("base_model.path", str(_get(params, "base_model.path", "")), True))
    for name, c in (_get(params, "reflect.candidates", {}) or {}).items():
        serve = c.get("serve_model") if isinstance(c, dict) and c.get("kind") == "endpoint" else ""
        if serve and Path(serve).parts[0] not in ("models", "data"):
            out.append((f"reflect.candidates.{name}.serve_model", str(serve), False))
    return out


def check_weights(params: dict) -> list[str]:
    """Each model directory's weight files: present, headers intact (a truncated copy is caught), names and
    shapes those of its config.json (`lm.weights`; headers only, no weight is read)."""
    from decision_pipeline.lm.weights import weight_problems
    out = []
    for key, path, reported in weight_dirs(params):
        root = Path(path).expanduser()
        if not (root / "config.json").is_file():
            if not reported:
                out.append(f"{key}: {root} is no model directory (no config.json); put the Hugging Face model "
                           f"directory there or fix {key}")
            continue
        out += weight_problems(root, key)
    return out


def check_endpoints(params: dict, base_tok: Any) -> list[str]:
    """Teacher (ids exchanged with the base: tokenizer compared), judge and endpoint reflection candidates."""
    out = []
    if _get(params, "generate.teacher", "") == "openai":
        out += check_endpoint("generate.teacher_base_url", _get(params, "generate.teacher_base_url", ""),
                              _get(params, "generate.teacher_model", ""), base_tok)
    if _get(params, "judge.base_url", ""):
        out += check_endpoint("judge.base_url", _get(params, "judge.base_url", ""), _get(params, "judge.model", ""))
    for name, c in (_get(params, "reflect.candidates", {}) or {}).items():
        if isinstance(c, dict) and c.get("kind") == "endpoint" and c.get("base_url") and not c.get("serve_model"):
            out += check_endpoint(f"reflect.candidates.{name}.base_url", c["base_url"], c.get("model", ""))
    return out


# sections with `engine: ray`: (section, workers key, CPUs each key or a fixed count, GPUs each)
RAY_SECTIONS = (("curate", "curate.ray.workers", 1, 0),
                ("generate", "generate.workers", "generate.ray.cpus_per_worker", 1),
                ("rl_probe", "rl_probe.workers", "rl_probe.ray.cpus_per_worker", 1),
                ("reflect", "reflect.ray.workers", "reflect.ray.cpus_per_worker", 0))


def check_ray(params: dict) -> list[str]:
    """Each section whose `engine` is ray joins its cluster as the stage would (`raypool.attach`: the address
    probed, the join bounded by `ray.connect_timeout_s`, the worker count checked against the cluster's
    CPUs, or GPUs where the cluster has them) and detaches again; a failure is the stage's own line."""
    from decision_pipeline.common import raycluster, raypool
    from decision_pipeline.common.params import from_dict

    out = []
    for section, workers_key, cpus, gpus in RAY_SECTIONS:
        if _get(params, f"{section}.engine", "local") != "ray":
            continue
        raw = _get(params, f"{section}.ray", {}) or {}
        names = ("address", "connect_timeout_s")
        try:
            cluster = from_dict(raycluster.RayParams, {k: v for k, v in raw.items() if k in names} if
                                isinstance(raw, dict) else raw, f"{section}.ray")
            workers, each = _get(params, workers_key, 1), cpus if isinstance(cpus, int) else _get(params, cpus, 1)
            on_cpu = section == "rl_probe" and _get(params, "runtime.device", "auto") == "cpu"
            ray, _ = raypool.attach(cluster, f"{section}.ray.address", int(workers), workers_key, int(each),
                                    0 if on_cpu else gpus,
                                    f"{workers_key} is {workers} but the Ray cluster at {cluster.address} has "
                                    f"{{gpus}} GPU(s); lower {workers_key} or add GPU nodes")
            raycluster.disconnect(ray)
        except PipelineError as exc:
            out.append(str(exc))
        except (TypeError, ValueError) as exc:  # a non-number worker count: `make check` names it
            out.append(f"{workers_key}: {exc}; run `make check`")
    return out


def check_plan(params: dict, gpu_gib: float, model_config: str | None) -> list[str]:
    """The memory plan's refusals (skipped when the model config is missing: reported above)."""
    source = model_config or (_get(params, "base_model.path", "") if _get(params, "base_model.source", "") == "path"
                              else "")
    if not source:
        return []
    try:
        shape = read_shape(source)
    except PipelineError as exc:
        return [] if not model_config else [str(exc)]
    return failures(memory_plan(params, shape, gpu_gib), gpu_gib)


def preflight(params: dict, root: Path, gpu_gib: float, model_config: str | None = None,
              cuda_available: Callable[[], bool] | None = None) -> list[str]:
    """Every failure line of the profile, in a fixed order (install, models, weights, endpoints, Ray clusters,
    data, memory)."""
    base_tok, model_errs = check_models(params)
    return (check_torch(params, cuda_available) + model_errs + check_weights(params) + check_endpoints(params, base_tok)
            + check_ray(params) + check_s1mb(params) + check_reviews(params, root)
            + check_plan(params, gpu_gib, model_config))
