"""Every params.yaml section and the config class that loads it (the classes live in the torch-free params
modules, e.g. lm/params.py and each decision sub-package's config.py, or beside their code).

Why one index: a preflight (`make check`) and the tests load every section of
every profile through the typed loaders, and a section no stage knows is an error.
`make check` also runs the checks a stage would only make when it starts: every regex-valued
param compiled (REGEX_PARAMS), the hygiene filters built, prompt and charter files read, so
a bad value is one line here instead of a failure twenty minutes into `dvc repro`.
"""
from __future__ import annotations

import re
from pathlib import Path

from decision_pipeline.bench.params import S1mbParams
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
from decision_pipeline.decision.base.config import BaseModelParams
from decision_pipeline.decision.evaluate.config import CalibrateParams, EvaluateParams
from decision_pipeline.decision.generate.generation import GenerateParams
from decision_pipeline.decision.rl.config import RlProbeParams, RlSelectParams, RLParams
from decision_pipeline.decision.sft.config import LrSweepParams, SelectChainsParams, SFTParams
from decision_pipeline.lm.params import PretrainParams, RuntimeParams, TokenizerParams
from decision_pipeline.questions.splits import ItemsParams

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
                if str(exc) in errors:
                    break  # the reference value has the same fault (a nested key it lacks too): said once
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
    from decision_pipeline.overrides import apply_checked, split_sets

    ap = argparse.ArgumentParser(prog="python -m decision_pipeline config",
                                 description="check: every params section (and overrides) before any stage runs; "
                                             "profile NAME: merge a checked profile into params.yaml; run-profile "
                                             "NAME: print the active profile, refuse another (make run)")
    ap.add_argument("command", choices=("check", "profile", "run-profile"))
    ap.add_argument("name", nargs="?", default="default", help="profile, run-profile: the profile (PROFILE)")
    ap.add_argument("--root", default=".", help="profile, run-profile: the repository root")
    ap.add_argument("--force", action="store_true", help="profile: overwrite params.yaml even if it holds edits; "
                    "run-profile: run params.yaml as it is whatever profile it is (FORCE_PROFILE=1)")
    ap.add_argument("--dry-run", action="store_true", help="run-profile: print the plan, write nothing")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--set", "-S", action="append", default=[], metavar="KEY=VALUE",
                    help="an override as `dvc exp run -S` takes it (repeatable)")
    ap.add_argument("--sets", default="", metavar="'K=V K2=[a, b]'",
                    help="several overrides in one argument (make's SET), split at blanks outside [...] and quotes")
    args = ap.parse_args(argv)
    if args.command != "check":
        return profile_main(args.command, args.name, args.root, args.force, args.dry_run)
    started = time.perf_counter()
    try:
        sets = [*args.set, *split_sets(args.sets)]
        # every bad override first (an unknown key with its "did you mean"), then the file with the good ones
        data, errors = apply_checked(read_params_file(args.params), sets, args.params, SECTIONS)
        reference = _committed_reference()
        errors += collect_errors(data, args.params, reference)
        errors += stage_check_errors(data, args.params, errors)
        if not errors:
            errors = prompt_errors(data, args.params)
    except PipelineError as exc:
        errors = [str(exc)]
    from decision_pipeline.common.profiles import printable

    for line in errors:
        print(printable(f"ERROR: {line}"), file=sys.stderr)
    if errors:
        print(f"[check] {len(errors)} error(s) in {args.params}; nothing was run", file=sys.stderr)
        return 2
    print(f"[check] {args.params}: {len(SECTIONS)} sections OK in {time.perf_counter() - started:.2f}s")
    return 0


# every param that holds regexes, with the flags its stage compiles them with (a test finds every
# field whose doc says "regex" and keeps this list complete)
REGEX_PARAMS: dict[str, int] = {
    "select_chains.lookup_patterns": re.IGNORECASE,   # decision/sft/chains.py find_lookup
    "rl.decisiveness_patterns": re.IGNORECASE,        # decision/rl/trainer.py RewardLog
    "curate.filters.boilerplate.patterns": re.IGNORECASE,  # curation/filters.py boilerplate
}


def _at(data: dict, dotted: str) -> object:
    node: object = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def regex_errors(data: dict, path: str | Path) -> list[str]:
    """Each regex-valued param compiled as its stage compiles it; one line per bad pattern."""
    errors = []
    for key, flags in REGEX_PARAMS.items():
        patterns = _at(data, key)
        if not isinstance(patterns, list):
            continue  # absent (a built-in default) or the wrong type (the typed loader says so)
        for i, pattern in enumerate(patterns):
            if not isinstance(pattern, str):
                continue
            try:
                re.compile(pattern, flags)
            except re.error as exc:
                errors.append(f"{path}: {key}[{i}]: {pattern!r} is not a valid regex ({exc}); fix the pattern")
            except (OverflowError, RecursionError, ValueError) as exc:  # absurd repeat counts, deep nesting
                errors.append(f"{path}: {key}[{i}]: {pattern!r} cannot be compiled ({type(exc).__name__}); "
                              "simplify the pattern")
    return errors


def stage_check_errors(data: dict, path: str | Path, known: list[str] = ()) -> list[str]:
    """What a stage checks only when it starts, checked now: regexes, the hygiene filters, quirks.
    A key an earlier error already names is not reported twice."""
    from decision_pipeline.curation.filters import build_filters

    errors = regex_errors(data, path)
    filters = _at(data, "curate.filters")
    if isinstance(filters, dict) and not any(f"{path}: curate.filters" in e for e in errors):
        try:
            build_filters(filters)
        except PipelineError as exc:
            errors.append(f"{path}: curate.{exc}")
    quirks = _at(data, "select_chains.quirks")
    if isinstance(quirks, list) and "" in quirks:
        errors.append(f"{path}: select_chains.quirks[{quirks.index('')}]: an empty string strips nothing; remove it")
    prefix = f"{path}: "
    named = [": " + e[len(prefix):].split(":", 1)[0].split("[", 1)[0] for e in errors]  # ': rl.decisiveness_patterns'
    return [e for e, key in zip(errors, named) if not any(key in k for k in known)]


def prompt_errors(data: dict, path: str | Path) -> list[str]:
    """Each reflect candidate's prompt file and the judge's through the placeholder check of its kind
    (a reflection prompt without {document} would reach the model without the text)."""
    from decision_pipeline.charter.charter import load_charter
    from decision_pipeline.charter.prompts import load_prompt
    from decision_pipeline.common.params import load_section

    from decision_pipeline.common.textfile import read_text

    reflect = load_section(SECTIONS["reflect"], "reflect", path, data)
    judge = load_section(SECTIONS["judge"], "judge", path, data)
    try:
        read_text(reflect.charter, missing="charter file not found; fix reflect.charter in params")  # encoding
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


# --------------------------------------------------------------------------- profiles

def profile_errors(merged: dict, overlay: dict, name: str, root: Path) -> list[str]:
    """A profile checked like params before it is merged into params.yaml: the merged result through
    every section's dataclass and the stage checks, all errors at once. An error on a key the overlay
    sets names profiles/<name>.yaml; any other names params.yaml (the committed base)."""
    from decision_pipeline.common.profiles import committed_params, overlay_keys, overlay_path

    label = "<params>"
    try:
        reference = committed_params(root)
    except PipelineError:
        reference = None
    errors = collect_errors(merged, label, reference)
    errors += stage_check_errors(merged, label, errors)
    if not errors and name != "default":
        declared = (merged.get("base") or {}).get("profile")
        if declared != name:
            errors.append(f"{label}: base.profile: is {declared!r}; a profile names itself (base.profile: {name}) "
                          "so `make run` can tell which profile params.yaml is")
    if not errors:
        errors = prompt_errors(merged, label)
    where = overlay_path(root, name) if name != "default" else Path(root) / "params.yaml"
    keys = overlay_keys(overlay)
    out = []
    for line in errors:
        if not line.startswith(f"{label}: "):
            out.append(line)  # a prompt or charter file: named already
            continue
        rest = line[len(label) + 2:]
        key = re.match(r"(?:section '([^']+)'|([^\s:\[]+))", rest)
        dotted = (key.group(1) or key.group(2)) if key else ""
        mine = any(dotted == k or dotted.startswith(k + ".") or k.startswith(dotted + ".") for k in keys)
        out.append(f"{where if mine else Path(root) / 'params.yaml'}: {rest}")
    return out


def profile_main(command: str, name: str, root: str, force: bool, dry_run: bool) -> int:
    """`make profile` (checked apply) and `make run`'s profile step (print the active one; refuse another)."""
    import sys

    from decision_pipeline.common.profiles import apply, print_errors, run_plan

    try:
        if command == "profile":
            path = apply(name, root, force, check=profile_errors)
            print(f"[profile] {path} is now the '{name}' profile (git diff params.yaml shows what it changed)")
            return 0
        line, switch = run_plan(name, root, force)
        if dry_run or not switch:
            if dry_run:
                print(line)
            return 0
        apply(name, root, check=profile_errors)
        print(f"[profile] params.yaml is now the '{name}' profile (git diff params.yaml shows what it changed)")
    except PipelineError as exc:
        print_errors(exc)
        return 2
    return 0


def _committed_reference() -> dict | None:
    """The committed params.yaml as known-good values to put back while collecting errors."""
    try:
        from decision_pipeline.common.profiles import committed_params

        return committed_params(Path("."))
    except (PipelineError, OSError, ValueError):
        return None

