"""Every params.yaml section and the config class that loads it (the classes live beside their code).

Why one index: a preflight (`make check`) and the tests load every section of
every profile through the typed loaders, and a section no stage knows is an error.
"""
from __future__ import annotations

import re
from pathlib import Path

from decision_pipeline.bench.adapter import S1mbParams
from decision_pipeline.bench.data import S1mbDataParams
from decision_pipeline.charter.annotate import AgreementParams, ReflectParams
from decision_pipeline.charter.improve_run import ImproveParams
from decision_pipeline.charter.judge import JudgeParams
from decision_pipeline.charter.judge_prompt import JudgePromptParams
from decision_pipeline.charter.ranking import RankParams
from decision_pipeline.charter.reviews import ReviewsParams
from decision_pipeline.charter.seed import SeedSampleParams
from decision_pipeline.charter.throughput import ThroughputParams
from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.params import BaseParams, load_section, read_params_file
from decision_pipeline.curation.documents import IngestParams
from decision_pipeline.curation.pipeline import CurateParams
from decision_pipeline.decision.base_model import BaseModelParams
from decision_pipeline.decision.calibration import CalibrateParams
from decision_pipeline.decision.chains import SelectChainsParams
from decision_pipeline.decision.evaluation import EvaluateParams
from decision_pipeline.decision.generation import GenerateParams
from decision_pipeline.decision.item_splits import ItemsParams
from decision_pipeline.decision.lr_choice import LrSweepParams
from decision_pipeline.decision.rl_probe import RlProbeParams
from decision_pipeline.decision.rl_select import RlSelectParams
from decision_pipeline.decision.rl_trainer import RLParams
from decision_pipeline.decision.sft_trainer import SFTParams
from decision_pipeline.lm.bpe import TokenizerParams
from decision_pipeline.lm.runtime import RuntimeParams
from decision_pipeline.lm.training import PretrainParams

SECTIONS: dict[str, type] = {
    "base": BaseParams, "items": ItemsParams, "ingest": IngestParams, "tokenizer": TokenizerParams,
    "curate": CurateParams, "pretrain": PretrainParams, "base_model": BaseModelParams,
    "generate": GenerateParams, "select_chains": SelectChainsParams, "lr_sweep": LrSweepParams,
    "sft": SFTParams, "calibrate": CalibrateParams, "evaluate": EvaluateParams,
    "s1mb_data": S1mbDataParams, "s1mb": S1mbParams,
    "rl_probe": RlProbeParams, "rl_select": RlSelectParams, "rl": RLParams,
    "seed_sample": SeedSampleParams, "reflect": ReflectParams, "improve": ImproveParams, "judge": JudgeParams,
    "reviews": ReviewsParams, "judge_agreement": AgreementParams, "throughput": ThroughputParams, "runtime": RuntimeParams,
    "judge_prompt": JudgePromptParams, "rank_generators": RankParams,
}


def load_all(path: str | Path = "params.yaml") -> dict[str, object]:
    """Load every section of a params file; an unknown or missing section is one clear line."""
    data = read_params_file(path)
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise PipelineError(f"{path}: section '{unknown[0]}' is unknown; known sections are {', '.join(SECTIONS)}")
    return {name: load_section(cls, name, path, data) for name, cls in SECTIONS.items()}


# --------------------------------------------------------------------------- make check

MAX_ERRORS_PER_SECTION = 20


def apply_sets(data: dict, sets: list[str], path: str | Path) -> dict:
    """`a.b.c=value` overrides applied exactly as `dvc exp run -S` applies them: DVC's own
    `apply_overrides` (Hydra's grammar, DVC's YAML writer) on a scratch copy, read back as YAML 1.2,
    so `-S sft.lr=5e-5` here checks the very value (`5e-05`, a float) the experiment's stages read."""
    import tempfile

    from decision_pipeline.common.yamlio import load_yaml

    if not sets:
        return data
    for item in sets:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise PipelineError(f"--set {item!r}: expected key.path=value (as dvc exp run -S takes it)")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "params.yaml"
        scratch.write_text(_dump_plain(data), encoding="utf-8")
        _dvc_apply_overrides(scratch, sets, path)
        return load_yaml(scratch.read_text(encoding="utf-8"), str(path))


def _dump_plain(data: dict) -> str:
    from decision_pipeline.common.profiles import dump

    return dump(data)


def _dvc_apply_overrides(scratch: Path, sets: list[str], path: str | Path) -> None:
    """DVC's `-S` code path; its refusal (bad Hydra syntax, a key under a non-mapping) as one line."""
    from dvc.exceptions import DvcException
    from dvc.utils.hydra import apply_overrides

    try:
        apply_overrides(scratch, list(sets))
    except DvcException as exc:
        cause = exc.__cause__
        detail = " ".join(str(cause or exc).split())[:300]
        raise PipelineError(f"{path}: --set {' '.join(sets)}: {detail}; write KEY=VALUE as dvc exp run -S "
                            "takes it (quote lists: SET='items.families=[keyword,count]')") from None
    except Exception as exc:  # Hydra/OmegaConf raise their own types for some inputs
        detail = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise PipelineError(f"{path}: --set {' '.join(sets)}: {detail}") from None


def _key_of(message: str, prefix: str) -> str | None:
    """The section key an error message names (`<file>: sft.max_lenght: unknown key` -> 'max_lenght')."""
    if not message.startswith(prefix):
        return None
    rest = message[len(prefix):]
    return rest.split(":", 1)[0].split(".", 1)[0].split("[", 1)[0].strip() or None


def collect_errors(data: dict, path: str | Path, reference: dict | None = None) -> list[str]:
    """Every error of a params mapping at once: unknown sections, then each section's bad keys.

    A section is loaded, its first error recorded, the culprit key put back to the reference
    value (or dropped when the reference has none) and the section loaded again, so one typo
    does not hide the next.
    """
    from decision_pipeline.common.params import from_dict

    errors = []
    for name in sorted(set(data) - set(SECTIONS), key=str):
        errors.append(f"{path}: section '{name}' is unknown; known sections are {', '.join(SECTIONS)}")
    for name, cls in SECTIONS.items():
        if name not in data:
            errors.append(f"{path}: section '{name}' is missing; add it (see params.yaml on main)")
            continue
        raw = data[name]
        good = (reference or {}).get(name) or {}
        for _ in range(MAX_ERRORS_PER_SECTION):
            try:
                from_dict(cls, raw, f"{path}: {name}")
                break
            except PipelineError as exc:
                errors.append(str(exc))
                key = _key_of(str(exc), f"{path}: {name}.") if isinstance(raw, dict) else None
                if key is None or key not in raw and key not in good:
                    break
                raw = dict(raw)
                if key in good:
                    raw[key] = good[key]
                else:
                    raw.pop(key, None)
                meant = re.search(r"did you mean '([^']+)'", str(exc))
                if meant and meant.group(1) not in raw and meant.group(1) in good:
                    raw[meant.group(1)] = good[meant.group(1)]  # the misspelt key's twin: reported once
    return errors


def check_main(argv: list[str] | None = None) -> int:
    """`make check`: params.yaml (plus --set overrides) through every section's typed loader in one go."""
    import argparse
    import sys
    import time

    from decision_pipeline.common.params import read_params_file

    ap = argparse.ArgumentParser(prog="python -m decision_pipeline.config check",
                                 description="Check every params section (and overrides) before any stage runs.")
    ap.add_argument("command", choices=("check",))
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--set", "-S", action="append", default=[], metavar="KEY=VALUE",
                    help="an override as `dvc exp run -S` takes it (repeatable)")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    try:
        data = apply_sets(read_params_file(args.params), args.set, args.params)
        reference = _committed_reference()
        errors = collect_errors(data, args.params, reference)
        if not errors:
            errors = prompt_errors(data, args.params)
    except PipelineError as exc:
        errors = [str(exc)]
    for line in errors:
        print(f"ERROR: {line}", file=sys.stderr)
    if errors:
        print(f"[check] {len(errors)} error(s) in {args.params}; nothing was run", file=sys.stderr)
        return 2
    print(f"[check] {args.params}: {len(SECTIONS)} sections OK in {time.perf_counter() - started:.2f}s")
    return 0


def prompt_errors(data: dict, path: str | Path) -> list[str]:
    """Each reflect candidate's prompt file and the judge's through the placeholder check of its kind
    (a reflection prompt without {document} would reach the model without the text)."""
    from decision_pipeline.charter.charter import load_charter
    from decision_pipeline.charter.prompts import load_prompt
    from decision_pipeline.common.params import load_section

    reflect = load_section(SECTIONS["reflect"], "reflect", path, data)
    judge = load_section(SECTIONS["judge"], "judge", path, data)
    try:
        charter = load_charter(reflect.charter)
    except PipelineError as exc:
        return [str(exc)]
    jobs = [(c.prompt, "reflection") for c in reflect.candidates.values() if getattr(c, "prompt", "")]
    if getattr(judge, "prompt", ""):
        jobs.append((judge.prompt, "judge"))
    errors = []
    for prompt, kind in dict.fromkeys(jobs):
        try:
            load_prompt(prompt, charter, kind)
        except PipelineError as exc:
            errors.append(str(exc))
    return errors


def _committed_reference() -> dict | None:
    """The committed params.yaml as known-good values to put back while collecting errors."""
    try:
        from decision_pipeline.common.profiles import committed_params

        return committed_params(Path("."))
    except (PipelineError, OSError, ValueError):
        return None


if __name__ == "__main__":
    raise SystemExit(check_main())
