"""`make check SET=...` / `--set`: overrides split, checked against the params schema, applied as `dvc exp run -S`.

Why checked before DVC applies them: Hydra refuses a key the file does not hold with "To append to your
config use +rl.lrr=1", advice that is wrong for a misspelt key (the stage would then refuse `lrr`) and
stopped the check before any other error was reported. Each override is read against the typed
sections first: an unknown key gets the loader's own "did you mean" line at once, a key the schema knows
but params.yaml leaves out (a field with a default) gets the `+` advice, and the remaining overrides are
applied one by one, so every bad one is reported and the good ones still reach the typed check.
"""
from __future__ import annotations

import dataclasses
import difflib
import tempfile
import types
import typing
from pathlib import Path

from decision_pipeline.common.errors import PipelineError

_OPEN, _CLOSE = "[{(", "]})"


def split_sets(text: str) -> list[str]:
    """`make check SET="a.b=1 c=[x, y]"` as overrides: split at blanks outside brackets and quotes,
    so a list or a quoted value with spaces stays one override (`make` splits at every blank)."""
    out, token, depth, quote, escaped = [], "", [], "", False
    for ch in text:
        if escaped:
            token, escaped = token + ch, False
            continue
        if ch == "\\" and quote:
            token, escaped = token + ch, True
            continue
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth.append(_CLOSE[_OPEN.index(ch)])
        elif ch in _CLOSE and depth and depth[-1] == ch:
            depth.pop()
        elif ch.isspace() and not depth:
            if token:
                out.append(token)
            token = ""
            continue
        token += ch
    if quote or depth:
        missing = quote or depth[-1]
        raise PipelineError(f"SET {text!r}: no closing {missing!r} in {token!r}; close it (a value with blanks "
                            "is one override inside [...] or quotes)")
    return out + ([token] if token else [])


def _present(data: dict, parts: list[str]) -> bool:
    """Whether the params hold the dotted key (a walk that meets a non-mapping counts as present: DVC
    then says what is wrong with it)."""
    node: object = data
    for part in parts:
        if not isinstance(node, dict):
            return True
        if part not in node:
            return False
        node = node[part]
    return True


def _unwrap(tp: typing.Any) -> typing.Any:
    """`X | None` -> X (the loader's Optional fields)."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0] if len(args) == 1 else tp
    return tp


def _hint(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def schema_problem(sections: dict[str, type], parts: list[str], where: str) -> str | None:
    """The loader's "unknown key (did you mean ...)" line for a dotted key the schema does not know,
    None when it knows it (then only params.yaml lacks it)."""
    if parts[0] not in sections:
        return (f"{where}: section '{parts[0]}' is unknown{_hint(parts[0], list(sections))}; "
                f"known sections are {', '.join(sections)}")
    tp: typing.Any = sections[parts[0]]
    allowed: tuple | None = None
    for i, part in enumerate(parts[1:], start=1):
        key = ".".join(parts[:i + 1])
        tp = _unwrap(tp)
        if dataclasses.is_dataclass(tp):
            fields = {f.name: f for f in dataclasses.fields(tp)}
            if part not in fields:
                return f"{where}: {key}: unknown key{_hint(part, list(fields))}; known keys are {', '.join(sorted(fields))}"
            allowed, tp = fields[part].metadata.get("keys"), typing.get_type_hints(tp)[part]
        elif typing.get_origin(tp) is dict:
            if allowed is not None and part not in allowed:
                return f"{where}: {key}: unknown key{_hint(part, list(map(str, allowed)))}; it may name " \
                       f"{', '.join(map(str, allowed))}"
            allowed, tp = None, (typing.get_args(tp) or (str, typing.Any))[1]
        else:
            return None  # a key under a list or a scalar: DVC's own refusal names it
    return None


def apply_sets(data: dict, sets: list[str], path: str | Path) -> dict:
    """`a.b.c=value` overrides applied exactly as `dvc exp run -S` applies them: DVC's own
    `apply_overrides` (Hydra's grammar, DVC's YAML writer) on a scratch copy, read back as YAML 1.2,
    so `-S sft.lr=5e-5` here checks the very value (`5e-05`, a float) the experiment's stages read.
    The first bad override raises (`apply_checked` lists them all)."""
    merged, errors = apply_checked(data, sets, path, {})
    if errors:
        raise PipelineError(errors[0])
    return merged


def apply_checked(data: dict, sets: list[str], path: str | Path,
                  sections: dict[str, type]) -> tuple[dict, list[str]]:
    """(params with every good override applied, one line per bad override). With `sections`, a key
    params.yaml lacks is read against the schema before DVC sees it (module docstring)."""
    from decision_pipeline.common.profiles import dump
    from decision_pipeline.common.yamlio import load_yaml

    errors, good = [], []
    for item in sets:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            errors.append(f"--set {item!r}: expected key.path=value (as dvc exp run -S takes it)")
            continue
        parts = key.strip().split(".")
        if sections and key[:1] not in "+~" and not _present(data, parts):
            problem = schema_problem(sections, parts, f"{path}: --set {item}")
            errors.append(problem or f"{path}: --set {item}: {path} has no {key}; the loader knows it, so "
                                     f"add it with +{item} (dvc exp run -S '+{item}')")
            continue
        good.append(item)
    if not good:
        return data, errors
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "params.yaml"
        scratch.write_text(dump(data), encoding="utf-8")
        for item in good:  # one at a time: a refused override is reported and the others still apply
            before = scratch.read_text(encoding="utf-8")
            try:
                _dvc_apply_overrides(scratch, [item], path)
            except PipelineError as exc:
                errors.append(str(exc))
                scratch.write_text(before, encoding="utf-8")  # DVC may have written part of the file
        return load_yaml(scratch.read_text(encoding="utf-8"), str(path)), errors


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
                            "takes it (lists in brackets: SET='items.families=[keyword, count]')") from None
    except Exception as exc:  # Hydra/OmegaConf raise their own types for some inputs
        detail = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise PipelineError(f"{path}: --set {' '.join(sets)}: {detail}") from None
