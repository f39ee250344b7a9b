"""Profiles as overlays: `profiles/<name>.yaml` holds only what differs from `params.yaml`.

Why: a full copy per profile put one knob in three files that drifted apart, and
`make run PROFILE=gpu` copied the GPU file over the tracked `params.yaml`, so a later plain
`make run` silently ran the GPU profile. Here a profile is merged over the committed
`params.yaml` (mappings key by key; `key: null` drops a mapping entry, e.g. a candidate the
profile does not serve) and `apply` writes the result as plain YAML in the layout DVC itself
writes, so `dvc exp run -S a.b=1` still changes one line. `apply` refuses to overwrite a
`params.yaml` that holds edits of your own (one that is neither the committed file nor a
profile merged over it).

Checked like params: `apply` takes a `check` (decision_pipeline.config.profile_errors, which
loads the merged result through every section's dataclass) and writes nothing while it finds
errors, all listed at once, each naming profiles/<name>.yaml and the key. A broken profile file
you are not switching to or from does not block a switch. Which profile a params.yaml is comes
from its own `base.profile` (every overlay sets it), so `make run` can print it and refuse a
params.yaml of another profile than asked for (`run_plan`).

    make profile PROFILE=gpu                                   # checked apply (python -m decision_pipeline config profile gpu)
    make profile PROFILE=default                               # back to the committed params
    python -m decision_pipeline profiles show micro            # the merged params, to stdout
"""
from __future__ import annotations

import argparse
import copy
import io
import subprocess
import sys
from pathlib import Path
from typing import Callable

import yaml

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.common.params import read_params_file
from decision_pipeline.common.textfile import read_text
from decision_pipeline.common.yamlio import load_yaml

PARAMS = "params.yaml"
PROFILE_DIR = "profiles"
# (merged params, overlay, profile name, root) -> every error, each one line naming file and key
Check = Callable[[dict, dict, str, Path], list[str]]


class ProfileErrors(PipelineError):
    """Several one-line errors found at once (the CLI prints one per line)."""

    def __init__(self, lines: list[str]):
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))


def merge(base: dict, overlay: dict, where: str = "") -> dict:
    """`overlay` laid over `base`: mappings merge key by key, `None` drops the key, anything else replaces."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value, f"{where}{key}.")
        else:
            out[key] = copy.deepcopy(value)
    return out


def overlay_of(base: dict, full: dict) -> dict:
    """The smallest overlay that turns `base` into `full` (how the profiles were converted)."""
    out: dict = {}
    for key, value in full.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            sub = overlay_of(base[key], value)
            if sub:
                out[key] = sub
        elif key not in base or base[key] != value:
            out[key] = copy.deepcopy(value)
    for key in base:
        if key not in full:
            out[key] = None
    return out


def profile_names(root: Path) -> list[str]:
    return ["default", *sorted(p.stem for p in (root / PROFILE_DIR).glob("*.yaml"))]


def overlay_path(root: Path, name: str) -> Path:
    return Path(root) / PROFILE_DIR / f"{name}.yaml"


def read_overlay(root: Path, name: str, base: dict) -> dict:
    """The overlay of profile `name`; a section the base does not have is refused (a typo would add one)."""
    path = overlay_path(root, name)
    if not path.is_file():
        raise PipelineError(f"{path}: profile '{name}' not found; use one of {', '.join(profile_names(root))}")
    overlay = load_yaml(read_text(path), str(path))
    if not isinstance(overlay, dict) or not overlay:
        raise PipelineError(f"{path}: expected a mapping of sections (only what differs from {PARAMS}), "
                            f"got {type(overlay).__name__ if overlay is not None else 'an empty file'}")
    unknown = sorted(set(overlay) - set(base), key=str)
    if unknown:
        raise PipelineError(f"{path}: section '{unknown[0]}' is not in {PARAMS}; a profile only changes "
                            "sections params.yaml has (fix the name)")
    return overlay


def overlay_keys(overlay: dict, prefix: str = "") -> set[str]:
    """Every dotted key an overlay sets or drops (`pretrain.model.hidden_size`, `reflect.candidates.x`)."""
    out: set[str] = set()
    for key, value in overlay.items():
        dotted = f"{prefix}{key}"
        out.add(dotted)
        if isinstance(value, dict):
            out |= overlay_keys(value, dotted + ".")
    return out


def declared_profile(params: dict) -> str | None:
    """The profile a params mapping says it is (`base.profile`), or None."""
    base = params.get("base") if isinstance(params, dict) else None
    name = base.get("profile") if isinstance(base, dict) else None
    return name if isinstance(name, str) and name else None


def which_profile(current: dict, root: Path, base: dict) -> str | None:
    """The profile `current` is exactly (a profile merged over the committed params), or None.

    The one it declares is tried first; a profile file that does not read is skipped, so a broken
    profile you are not switching to or from blocks nothing."""
    names = profile_names(root)
    declared = declared_profile(current)
    for name in ([declared] if declared in names else []) + [n for n in names if n != declared]:
        try:
            if merged_profile(name, root, base) == current:
                return name
        except PipelineError:
            continue
    return None


def committed_text(root: Path) -> str:
    """`params.yaml` as committed (git HEAD), the base every profile is merged over; the file on disk
    when there is no git history (a copy of the tree)."""
    try:
        return subprocess.run(["git", "show", f"HEAD:{PARAMS}"], cwd=root, capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return (root / PARAMS).read_text(encoding="utf-8")


def committed_params(root: Path) -> dict:
    data = load_yaml(committed_text(root), f"{root / PARAMS} (committed)")
    if not isinstance(data, dict):
        raise PipelineError(f"{root / PARAMS}: the committed file holds no mapping of sections")
    return data


def merged_profile(name: str, root: str | Path = ".", base: dict | None = None) -> dict:
    """The params a run of profile `name` uses (`default` = params.yaml itself)."""
    root = Path(root)
    base = read_params_file(root / PARAMS) if base is None else base
    if name in ("", "default"):
        return copy.deepcopy(base)
    return merge(base, read_overlay(root, name, base))


def _yaml():
    """ruamel as DVC sets it up when it applies `-S`: round trip (comments kept), block style."""
    from ruamel.yaml import YAML

    writer = YAML()
    writer.default_flow_style = False
    writer.representer.add_representer(float, _float_as_yaml11)
    return writer


def _float_as_yaml11(representer, value: float):
    """Floats written so YAML 1.1 readers (PyYAML, which the stages use) read a number back:
    ruamel writes 1e-05, which PyYAML reads as the string '1e-05'; this writes 1.0e-05."""
    text = yaml.safe_dump(value).split("\n", 1)[0]
    return representer.represent_scalar("tag:yaml.org,2002:float", text)


def dump(params: dict) -> str:
    """Plain block-style YAML in the layout DVC writes (for merged params with no file behind them)."""
    stream = io.StringIO()
    _yaml().dump(params, stream)
    return stream.getvalue()


def _lay_over(node, overlay: dict) -> None:
    """`merge` on ruamel's round-trip mapping, in place, so untouched lines and comments stay as they are."""
    for key, value in overlay.items():
        if value is None:
            node.pop(key, None)
        elif isinstance(value, dict) and isinstance(node.get(key), dict):
            _lay_over(node[key], value)
        else:
            node[key] = copy.deepcopy(value)


def render(name: str, root: Path) -> str:
    """The text of params.yaml for profile `name`: the committed file with the overlay laid over it."""
    text = committed_text(root)
    if name in ("", "default"):
        return text
    writer = _yaml()
    doc = writer.load(text)
    _lay_over(doc, read_overlay(root, name, committed_params(root)))
    stream = io.StringIO()
    writer.dump(doc, stream)
    return stream.getvalue()


def apply(name: str, root: str | Path = ".", force: bool = False, check: Check | None = None) -> Path:
    """Write profile `name` merged over the committed params into params.yaml; refuse to clobber edits,
    and (with `check`) refuse a profile whose merged params do not load, listing every error."""
    root = Path(root)
    base = committed_params(root)
    target = root / PARAMS
    if name not in ("", "default") and not overlay_path(root, name).is_file():
        raise PipelineError(f"{overlay_path(root, name)}: profile '{name}' not found; use one of "
                            f"{', '.join(profile_names(root))}")
    if target.is_file() and not force:
        if which_profile(read_params_file(target), root, base) is None:
            raise PipelineError(f"{target}: holds edits that are not a profile; commit or stash them, "
                                "or pass --force to overwrite")
    overlay = {} if name in ("", "default") else read_overlay(root, name, base)
    if check is not None and overlay:  # going back to the committed file is never refused (make check judges it)
        errors = check(merge(base, overlay), overlay, name or "default", root)
        if errors:
            raise ProfileErrors(errors)
    text = render(name, root)
    write_text_atomic(target, text)
    return target


def run_plan(name: str, root: str | Path = ".", force: bool = False) -> tuple[str, bool]:
    """What `make run PROFILE=name` does with params.yaml: (the line to print, whether to switch to `name`).

    Refused (a PipelineError): a params.yaml that is another profile than `name` (by its base.profile),
    unless `force` (FORCE_PROFILE=1: run it as it is); a switch is made only to a profile other than
    default from a params.yaml that is exactly some profile (edits of yours are never overwritten)."""
    root = Path(root)
    current = read_params_file(root / PARAMS)
    declared = declared_profile(current) or "unknown"
    names = profile_names(root)
    if name not in names:
        raise PipelineError(f"PROFILE={name}: no profiles/{name}.yaml; use one of {', '.join(names)}")
    base = committed_params(root)
    if declared == name:
        try:
            exact = merged_profile(name, root, base) == current
        except PipelineError:
            exact = False
        return f"[profile] {name}" + ("" if exact else f" (with edits of yours: git diff {PARAMS})"), False
    if force:
        return (f"[profile] {declared}: {PARAMS} as it is (base.profile: {declared}), not PROFILE={name} "
                "(FORCE_PROFILE=1)"), False
    if name != "default" and which_profile(current, root, base) is not None:
        return f"[profile] {name} (switching {PARAMS} from '{declared}' to '{name}')", True
    edits = "" if which_profile(current, root, base) else " with edits of yours"
    raise PipelineError(f"{root / PARAMS}: is the '{declared}' profile{edits} (base.profile), not PROFILE={name}; "
                        f"run it with `make run PROFILE={declared}`, switch with `make profile PROFILE={name}` "
                        "(edits of yours are never overwritten), or run it as it is with FORCE_PROFILE=1")


def print_errors(exc: PipelineError) -> None:
    for line in getattr(exc, "lines", None) or [str(exc)]:
        print(printable(f"ERROR: {line}"), file=sys.stderr)


def printable(line: str) -> str:
    """A message as one printable line: a stray surrogate (an argument that was not UTF-8) as \\udcff,
    never an encoding error while reporting an error."""
    return line.encode("utf-8", "backslashreplace").decode("utf-8")


def main(argv: list[str] | None = None) -> int:
    """`show` only: applying goes through `python -m decision_pipeline config profile` (`make profile`),
    which checks the merged params against the dataclasses first (this module sits below them)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("apply", "show"))
    ap.add_argument("name", help="default or a file name under profiles/ without .yaml")
    ap.add_argument("--root", default=".")
    ap.add_argument("--force", action="store_true", help="(apply) overwrite params.yaml even if it holds edits")
    args = ap.parse_args(argv)
    if args.command == "apply":
        print(f"ERROR: apply a profile with `make profile PROFILE={args.name}` (python -m decision_pipeline config "
              f"profile {args.name}), which checks it against the params dataclasses first", file=sys.stderr)
        return 2
    try:
        sys.stdout.write(dump(merged_profile(args.name, args.root)))
    except PipelineError as exc:
        print_errors(exc)
        return 2
    return 0

