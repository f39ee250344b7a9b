"""Profiles as overlays: `profiles/<name>.yaml` holds only what differs from `params.yaml`.

Why: a full copy per profile put one knob in three files that drifted apart, and
`make run PROFILE=gpu` copied the GPU file over the tracked `params.yaml`, so a later plain
`make run` silently ran the GPU profile. Here a profile is merged over the committed
`params.yaml` (mappings key by key; `key: null` drops a mapping entry, e.g. a candidate the
profile does not serve) and `apply` writes the result as plain YAML in the layout DVC itself
writes, so `dvc exp run -S a.b=1` still changes one line. `apply` refuses to overwrite a
`params.yaml` that holds edits of your own (one that is neither the committed file nor a
profile merged over it).

    python -m decision_pipeline.common.profiles apply gpu      # make profile PROFILE=gpu
    python -m decision_pipeline.common.profiles apply default  # back to the committed params
    python -m decision_pipeline.common.profiles show micro     # the merged params, to stdout
"""
from __future__ import annotations

import argparse
import copy
import io
import subprocess
import sys
from pathlib import Path

import yaml

from decision_pipeline.common.yamlio import load_yaml

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import write_text_atomic
from decision_pipeline.common.params import read_params_file

PARAMS = "params.yaml"
PROFILE_DIR = "profiles"


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


def read_overlay(root: Path, name: str, base: dict) -> dict:
    """The overlay of profile `name`; a section the base does not have is refused (a typo would add one)."""
    path = root / PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise PipelineError(f"{path}: profile '{name}' not found; use one of {', '.join(profile_names(root))}")
    overlay = read_params_file(path)
    unknown = sorted(set(overlay) - set(base))
    if unknown:
        raise PipelineError(f"{path}: section '{unknown[0]}' is not in {PARAMS}; a profile only changes "
                            "sections params.yaml has (fix the name)")
    return overlay


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


def apply(name: str, root: str | Path = ".", force: bool = False) -> Path:
    """Write profile `name` merged over the committed params into params.yaml; refuse to clobber edits."""
    root = Path(root)
    base = committed_params(root)
    target = root / PARAMS
    if target.is_file() and not force:
        current = read_params_file(target)
        known = [merged_profile(n, root, base) for n in profile_names(root)]
        if current not in known:
            raise PipelineError(f"{target}: holds edits that are not a profile; commit or stash them, "
                                "or pass --force to overwrite")
    text = render(name, root)
    write_text_atomic(target, text)
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("apply", "show"))
    ap.add_argument("name", help="default or a file name under profiles/ without .yaml")
    ap.add_argument("--root", default=".")
    ap.add_argument("--force", action="store_true", help="overwrite params.yaml even if it holds edits")
    args = ap.parse_args(argv)
    try:
        if args.command == "show":
            sys.stdout.write(dump(merged_profile(args.name, args.root)))
        else:
            path = apply(args.name, args.root, args.force)
            print(f"[profile] {path} is now the '{args.name}' profile (git diff {PARAMS} shows what it changed)")
    except PipelineError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
