"""Typed params: each `params.yaml` section loads into a dataclass.

Why: `dvc exp run -S key=value` rewrites params by hand-typed keys; a typo must
fail at once (naming key, file and what was expected) instead of being ignored.
Range and choice rules live in `field(metadata=...)` beside the field they guard:
``min``, ``max`` (inclusive), ``gt`` (strictly above), ``choices`` and ``nonempty``.

External inputs: a path param that names no file is set to ``NO_PATH`` (a committed
empty placeholder), never to '': each such path is a DVC dep of its stage
(`${items.external}` in dvc.yaml) and DVC cannot track an empty path. The loader
turns ``NO_PATH`` back into '' so the library reads "none" as before.
"""
from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.gitindex import forget_index_stat
from decision_pipeline.common.yamlio import load_yaml

T = TypeVar("T")
PARAMS_FILE = "params.yaml"
NO_PATH = "configs/external/none"  # "no external file": a real (non-empty) placeholder file, so it can be a DVC dep
# every section a pipeline params file may hold (decision_pipeline.config maps each to its class; a
# test keeps the two equal). Kept here so every stage checks a file's sections without importing them all.
SECTION_NAMES = ("base", "items", "ingest", "tokenizer", "curate", "pretrain", "base_model", "generate",
                 "select_chains", "lr_sweep", "sft", "calibrate", "evaluate", "s1mb_data", "s1mb",
                 "rl_probe", "rl_select", "rl", "seed_sample", "reflect", "improve", "judge", "reviews",
                 "judge_agreement", "throughput", "runtime", "judge_prompt", "rank_generators")


def rule(*, min: float | None = None, max: float | None = None, gt: float | None = None,
         choices: tuple | None = None, keys: tuple | None = None, nonempty: bool = False,
         external: bool = False, run_control: bool = False,
         default: Any = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING, doc: str = "") -> Any:
    """A dataclass field with validation metadata (and an optional default).

    `keys` names what a mapping's keys may be: a typo inside a mapping
    (`register_weights: {forun: 0.6}`) fails like a typo of a field name.
    `gt` is an exclusive lower bound (a learning rate of 0 trains nothing, silently);
    `nonempty` refuses an empty list or mapping (`families: []` makes 0 items downstream), or a blank string.
    `external` marks a path that is a DVC dep of its stage: '' is refused (DVC cannot track an empty
    path and fails with a bare "unexpected error"); `configs/external/none` is the way to say none.
    `run_control` marks a knob that decides how a run is carried out, never what it computes
    (threads, save cadence, memory placement, budgets that stop early): a resumable work directory
    stays valid when it changes (common/workdir.py).
    """
    meta = {"min": min, "max": max, "gt": gt, "choices": choices, "keys": keys, "nonempty": nonempty,
            "external": external, "run_control": run_control, "doc": doc}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def read_params_file(path: str | Path = PARAMS_FILE) -> dict:
    """Read the whole params file; a missing or malformed file is a PipelineError."""
    path = Path(path)
    if not path.is_file():
        raise PipelineError(f"{path}: params file not found; run from the repository root or pass --params")
    forget_index_stat(path)  # inside `dvc exp run`: keep git status truthful (common/gitindex.py)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise PipelineError(f"{path}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    data = load_yaml(text, str(path))
    if not isinstance(data, dict):
        raise PipelineError(f"{path}: expected a mapping of sections at the top level")
    return data


def load_section(cls: type[T], section: str, path: str | Path = PARAMS_FILE,
                 data: dict | None = None) -> T:
    """Load `section` of the params file into dataclass `cls`, validating every key."""
    data = read_params_file(path) if data is None else data
    if section not in data:
        raise PipelineError(f"{path}: section '{section}' is missing; add it (see params.yaml on main)")
    if section in SECTION_NAMES:
        check_sections(data, path)
    return from_dict(cls, data[section], f"{path}: {section}")


def check_sections(data: dict, path: str | Path) -> None:
    """A pipeline params file holds pipeline sections only: a misspelt section (`itmes:`) would
    otherwise be ignored while the stage reads the unchanged, correctly spelt one."""
    unknown = sorted(set(data) - set(SECTION_NAMES), key=str)
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), SECTION_NAMES, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise PipelineError(f"{path}: section '{shown(unknown[0])}' is unknown{hint}; "
                            f"known sections are {', '.join(SECTION_NAMES)}")


def shown(key: object) -> str:
    """A key as it may be printed: printable ASCII as is, anything else escaped (`bat\\u0441h_docs`, `a\\u200bb`),
    so an invisible or look-alike character in a hand-typed key is visible in the one-line error."""
    text = str(key)
    return "".join(ch if " " < ch < "\x7f" else "\\x20" if ch == " " else ascii(ch)[1:-1] for ch in text)


def from_dict(cls: type[T], raw: Any, where: str) -> T:
    """Build dataclass `cls` from a mapping; `where` prefixes error messages."""
    if not isinstance(raw, dict):
        raise PipelineError(f"{where}: expected a mapping, got {type(raw).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), list(fields), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise PipelineError(f"{where}.{shown(unknown[0])}: unknown key{hint}; known keys are {', '.join(sorted(fields))}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, f in fields.items():
        key = f"{where}.{name}"
        if name not in raw:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise PipelineError(f"{key}: missing key; expected {_type_name(hints[name])}")
            continue
        if f.metadata.get("external") and isinstance(raw[name], str) and not raw[name].strip():
            raise PipelineError(f"{key}: empty path; write {NO_PATH} for none (an external input is a DVC dep)")
        value = _coerce(raw[name], hints[name], key)
        _check_rules(value, f.metadata, key)
        values[name] = value
    return cls(**values)


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is not None:
        return str(tp).replace("typing.", "")
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check `value` against type hint `tp`; ints widen to float, nothing else is converted."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, arg, key)
            except PipelineError as exc:
                errors.append(str(exc))
        raise PipelineError(f"{key}: expected {_type_name(tp)}, got {value!r}")
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, key)
    if origin is list:
        if not isinstance(value, list):
            raise PipelineError(f"{key}: expected a list, got {value!r}")
        items = [_coerce(v, args[0], f"{key}[{i}]") for i, v in enumerate(value)] if args else value
        seen: list = []
        for i, v in enumerate(items):  # a repeated entry is a typo or a pasted line, never meant
            if isinstance(v, (str, int, float)) and v in seen:
                raise PipelineError(f"{key}[{i}]: {v!r} is listed twice; remove the repeat")
            seen.append(v)
        return items
    if origin is dict:
        if not isinstance(value, dict):
            raise PipelineError(f"{key}: expected a mapping, got {value!r}")
        if not args:
            return value
        return {_coerce(k, args[0], key): _coerce(v, args[1], f"{key}.{shown(k)}") for k, v in value.items()}
    if tp is Any:
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PipelineError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise PipelineError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise PipelineError(f"{key}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise PipelineError(f"{key}: expected a string, got {value!r}")
        return "" if value and Path(value).as_posix() == NO_PATH else value
    raise TypeError(f"unsupported params type {tp!r} at {key}")


def _check_rules(value: Any, meta: typing.Mapping, key: str) -> None:
    if value is None:
        return
    allowed = meta.get("keys")
    if allowed is not None and isinstance(value, dict):
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            raise PipelineError(f"{key}.{shown(unknown[0])}: unknown key; it may name {', '.join(map(str, allowed))}")
        value = list(value.values())
    if meta.get("nonempty") and isinstance(value, str) and not value.strip():
        raise PipelineError(f"{key} is empty; give {meta.get('doc') or 'a value'}")
    if meta.get("nonempty") and isinstance(value, (list, dict)) and not value:
        hint = f"one of {', '.join(map(str, meta['choices']))}" if meta.get("choices") else "one value"
        raise PipelineError(f"{key} is empty; list at least {hint}")
    choices = meta.get("choices")
    items = value if isinstance(value, list) else [value]
    for item in items:
        if choices is not None and item not in choices:
            raise PipelineError(f"{key}: {item!r} is not one of {', '.join(map(str, choices))}")
        if isinstance(item, float) and (item != item or item in (float("inf"), float("-inf"))):
            raise PipelineError(f"{key}: expected a finite number, got {item!r}")
        lo, hi = meta.get("min"), meta.get("max")
        if lo is not None and isinstance(item, (int, float)) and item < lo:
            raise PipelineError(f"{key}: expected a value >= {lo}, got {item!r}")
        if hi is not None and isinstance(item, (int, float)) and item > hi:
            raise PipelineError(f"{key}: expected a value <= {hi}, got {item!r}")
        gt = meta.get("gt")
        if gt is not None and isinstance(item, (int, float)) and item <= gt:
            raise PipelineError(f"{key}: expected a value > {gt}, got {item!r}")


@dataclasses.dataclass
class BaseParams:
    """Shared keys every stage may read (stages track only the dotted keys they use)."""
    seed: int = rule(min=0, doc="root seed: every random choice derives from it and a named purpose")
    profile: str = rule(choices=("default", "gpu", "micro"), doc="which profile this params file is (recorded in the report)")


def load_base(path: str | Path = PARAMS_FILE) -> BaseParams:
    return load_section(BaseParams, "base", path)


def describe(cls: type, section: str) -> str:
    """The params section's fields with types, rules and help text (TRL-style: the docs are data)."""
    hints = typing.get_type_hints(cls)
    lines = [f"params.yaml section '{section}' ({cls.__name__}):"]
    for f in dataclasses.fields(cls):
        meta = f.metadata
        rules = [f"{k} {meta[k]}" for k in ("min", "max") if meta.get(k) is not None]
        if meta.get("gt") is not None:
            rules.append(f"> {meta['gt']}")
        if meta.get("nonempty"):
            rules.append("non-empty")
        if meta.get("choices"):
            rules.append("one of " + "|".join(map(str, meta["choices"])))
        extra = f" [{', '.join(rules)}]" if rules else ""
        lines.append(f"  {section}.{f.name}: {_type_name(hints[f.name])}{extra}")
        if meta.get("doc"):
            lines.append(f"      {meta['doc']}")
    return "\n".join(lines)


def stage_parser(doc: str | None, *configs: tuple[type, str]) -> "argparse.ArgumentParser":
    """An argument parser whose --help also lists each params section the stage reads."""
    import argparse

    epilog = "\n\n".join(describe(cls, section) for cls, section in configs)
    return argparse.ArgumentParser(description=doc, epilog=epilog,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
