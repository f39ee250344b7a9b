"""A model directory's weight files checked against its config.json without loading a weight.

Why: a directory with no weights, a half-copied `model.safetensors` or shards of another model
passes a tokenizer check and then dies inside transformers/safetensors with a traceback, hours
into a GPU run (after curation and pretraining). Here, in about a second: the weight files
transformers would pick exist (`model.safetensors`, or the shards of `model.safetensors.index.json`,
or a `pytorch_model.bin` checkpoint); each safetensors header parses (the 8-byte length and the JSON
header only: dtypes, shapes and data offsets, and the offsets end exactly at the end of the file, so
a truncated copy is caught); and the tensor names and shapes are those of the model config.json
builds, taken from that model built on the meta device (exact names and shapes, no memory; tied
embeddings stored once). Each problem is one line naming the file and what to do.
"""
from __future__ import annotations

import json
import re
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decision_pipeline.common.errors import PipelineError

SAFE, SAFE_INDEX = "model.safetensors", "model.safetensors.index.json"
BIN, BIN_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"
MAX_HEADER = 100_000_000  # safetensors' own limit on the JSON header
# bytes per element; sub-byte and unknown dtypes get no size check (safetensors decides on those)
ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2,
            "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8}
SHOWN = 3  # tensor names quoted per problem line
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


@dataclass(frozen=True)
class Tensor:
    """One tensor as a weight file's header declares it."""
    dtype: str
    shape: tuple[int, ...]
    file: str


class WeightsError(PipelineError):
    """A weight file that transformers could not load; the message names the file and the fix."""


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _recopy(path: Path) -> str:
    return f"copy {path.name} again (an interrupted download or copy leaves such a file)"


def read_safetensors_header(path: Path) -> dict[str, Tensor]:
    """name -> Tensor from a safetensors file's header; reads 8 + header bytes, never the data.

    Refused (WeightsError): a file shorter than its header, a header that is not a JSON object of
    {dtype, shape, data_offsets}, offsets that overlap, leave gaps or do not end exactly at the end
    of the file (shorter: truncated; longer: trailing bytes), a byte size that does not fit the shape."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise WeightsError(f"{path}: {size} bytes, too short for a safetensors header; {_recopy(path)}")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER or 8 + n > size:
            raise WeightsError(f"{path}: header length {n} does not fit the file's {size} bytes (truncated or not "
                               f"safetensors); {_recopy(path)}")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise WeightsError(f"{path}: the safetensors header is not JSON ({raw[:40]!r}); {_recopy(path)}") from None
    if not isinstance(header, dict):
        raise WeightsError(f"{path}: the safetensors header is a {type(header).__name__}, not an object; "
                           f"{_recopy(path)}")
    tensors, spans = {}, []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        tensor, span = _entry(path, name, entry)
        tensors[name] = tensor
        spans.append((span, name))
    data = size - 8 - n
    end = 0
    for (begin, stop), name in sorted(spans):
        if begin != end:
            raise WeightsError(f"{path}: tensor {name} starts at data byte {begin}, expected {end} (overlapping "
                               f"or gapped offsets); {_recopy(path)}")
        end = stop
    if end > data:
        raise WeightsError(f"{path}: truncated: the header says the data runs to byte {8 + n + end:,}, the file has "
                           f"{size:,} bytes; {_recopy(path)}")
    if end < data:
        raise WeightsError(f"{path}: {data - end:,} bytes after the last tensor (a damaged or joined file); "
                           f"{_recopy(path)}")
    _safetensors_parses(path)
    return tensors


def _safetensors_parses(path: Path) -> None:
    """safetensors' own header parse (maps the file, reads no tensor): what it refuses at load time and the
    checks above let through (a dtype name it does not know, e.g. a flipped `F32` -> `F3B`) is one line here."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="np"):
            pass
    except Exception as exc:  # noqa: BLE001 - SafetensorError and friends: the file's fault, in one line
        reason = " ".join(str(exc).split())[:160]
        raise WeightsError(f"{path}: safetensors cannot read its header ({reason}); {_recopy(path)}") from None


def _entry(path: Path, name: str, entry: Any) -> tuple[Tensor, tuple[int, int]]:
    """One header entry checked: dtype a string, shape non-negative ints, offsets ordered and sized."""
    ok = (isinstance(entry, dict) and isinstance(entry.get("dtype"), str) and isinstance(entry.get("shape"), list)
          and all(type(d) is int and d >= 0 for d in entry["shape"]) and isinstance(entry.get("data_offsets"), list)
          and len(entry["data_offsets"]) == 2 and all(type(o) is int and o >= 0 for o in entry["data_offsets"])
          and entry["data_offsets"][0] <= entry["data_offsets"][1])
    if not ok:
        shown = json.dumps(entry)[:80]
        raise WeightsError(f"{path}: header entry {name} is {shown}, not {{dtype, shape, data_offsets}}; "
                           f"{_recopy(path)}")
    shape, (begin, stop) = tuple(entry["shape"]), entry["data_offsets"]
    item = ITEMSIZE.get(entry["dtype"])
    if item is not None and (stop - begin) != _numel(shape) * item:
        raise WeightsError(f"{path}: tensor {name} ({entry['dtype']} {list(shape)}) needs {_numel(shape) * item} "
                           f"bytes, its offsets give {stop - begin}; {_recopy(path)}")
    return Tensor(entry["dtype"], shape, path.name), (begin, stop)


def _index(root: Path, name: str) -> dict[str, str]:
    """The weight_map of a shard index: tensor name -> shard file in `root`."""
    path = root / name
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WeightsError(f"{path}: not JSON ({type(exc).__name__}); copy the index that came with the shards") from None
    wmap = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(wmap, dict) or not wmap or not all(isinstance(k, str) and isinstance(v, str) and v
                                                         and "/" not in v and "\\" not in v for k, v in wmap.items()):
        raise WeightsError(f"{path}: no weight_map of tensor name -> shard file; copy the index that came with the "
                           "shards")
    return wmap


def _torch_bin(path: Path) -> None:
    """A pytorch_model.bin is a zip archive (torch >= 1.6) whose members all lie inside the file; the
    legacy pickle format has no directory to check and is let through to transformers."""
    with path.open("rb") as f:
        magic = f.read(4)
    if magic[:1] == b"\x80":
        return
    if magic != b"PK\x03\x04":
        raise WeightsError(f"{path}: not a torch checkpoint (starts with {magic!r}); {_recopy(path)}")
    size = path.stat().st_size
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
    except (zipfile.BadZipFile, OSError):
        raise WeightsError(f"{path}: truncated (its zip directory is missing); {_recopy(path)}") from None
    if any(m.header_offset + m.compress_size > size for m in members):
        raise WeightsError(f"{path}: truncated (a member runs past the end of the file); {_recopy(path)}")


def checkpoint_tensors(root: Path) -> dict[str, Tensor] | None:
    """name -> Tensor over the weight files transformers would load, in its order of preference
    (model.safetensors, then its shard index, then pytorch_model.bin and its index); None for a
    torch .bin checkpoint (its tensors cannot be listed without unpickling). WeightsError on the
    first file that is missing, truncated or inconsistent with its index."""
    if (root / SAFE).is_file():
        return read_safetensors_header(root / SAFE)
    for index, single in ((SAFE_INDEX, False), (BIN_INDEX, True)):
        if not (root / index).is_file():
            continue
        wmap = _index(root, index)
        missing = sorted({f for f in wmap.values() if not (root / f).is_file()})
        if missing:
            raise WeightsError(f"{root / index}: lists {len(missing)} shard(s) that are not in the directory "
                               f"({', '.join(missing[:SHOWN])}); copy every shard the index names")
        if single:
            for shard in sorted(set(wmap.values())):
                _torch_bin(root / shard)
            return None
        tensors: dict[str, Tensor] = {}
        for shard in sorted(set(wmap.values())):
            tensors.update(read_safetensors_header(root / shard))
        stray = sorted(k for k, f in wmap.items() if tensors.get(k) is None or tensors[k].file != f)
        if stray:
            raise WeightsError(f"{root / index}: {len(stray)} tensor(s) are not in the shard it names ("
                               f"{', '.join(stray[:SHOWN])}); the index and the shards are of different copies: "
                               "copy them again together")
        return tensors
    if (root / BIN).is_file():
        _torch_bin(root / BIN)
        return None
    raise WeightsError(f"{root}: no weights ({SAFE}, or {SAFE_INDEX} with its shards, or {BIN}); copy the model's "
                       "weight files into the directory (e.g. `hf download <repo> --local-dir <dir>`)")


@dataclass(frozen=True)
class Expected:
    """What config.json asks of the weights: exact names and shapes (None where they cannot be known
    without loading: custom code, quantized weights, checkpoint renames), plus the plain numbers."""
    shapes: dict[str, tuple[int, ...]] | None
    tied: list[set[str]]          # groups of names holding one tensor (stored once)
    optional: list[str]           # regexes of names transformers lets be missing or extra
    vocab: int | None
    hidden: int | None
    layers: int | None


def _text_config(config: Any) -> Any:
    return getattr(config, "text_config", None) or config


def expected_tensors(root: Path) -> Expected:
    """The model config.json describes, built on the meta device (no memory, no weights)."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()   # config warnings belong to the load, not to this check
    try:
        return _expected(root)
    finally:
        hf_logging.set_verbosity(level)


def _expected(root: Path) -> Expected:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(str(root), local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any config error is the user's to fix, in one line
        reason = " ".join(str(exc).split())[:160]
        raise WeightsError(f"{root / 'config.json'}: transformers cannot read it ({type(exc).__name__}: {reason}); "
                           "copy the config.json that came with the weights") from None
    text = _text_config(config)
    plain = dict(vocab=getattr(text, "vocab_size", None), hidden=getattr(text, "hidden_size", None),
                 layers=getattr(text, "num_hidden_layers", None))
    if getattr(config, "quantization_config", None) is not None:
        return Expected(None, [], [], **plain)
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        from transformers.conversion_mapping import get_model_conversion_mapping
        renamed = bool(get_model_conversion_mapping(model, add_legacy=False))
    except Exception as exc:  # noqa: BLE001 - custom code etc.: fall back to the plain numbers
        if type(config) in AutoModelForCausalLM._model_mapping:  # a causal LM transformers knows: its load fails alike
            reason = " ".join(str(exc).split())[:160]
            raise WeightsError(f"{root / 'config.json'}: transformers cannot build the model it describes "
                               f"({type(exc).__name__}: {reason}); copy the config.json that came with the weights"
                               ) from None
        return Expected(None, [], [], **plain)
    if renamed:   # transformers renames/fuses this family's checkpoint tensors while loading
        return Expected(None, [], [], **plain)
    shapes = {name: tuple(t.shape) for name, t in model.state_dict(keep_vars=True).items()}
    groups: dict[int, set[str]] = {}
    for name, t in model.state_dict(keep_vars=True).items():
        groups.setdefault(id(t), set()).add(name)
    tied = [g for g in groups.values() if len(g) > 1]
    tied_map = getattr(model, "_tied_weights_keys", None)
    if isinstance(tied_map, dict) and getattr(text, "tie_word_embeddings", getattr(config, "tie_word_embeddings", False)):
        tied += [{a, b} for a, b in tied_map.items() if a in shapes and b in shapes]
    optional = [p for attr in ("_keys_to_ignore_on_load_missing", "_keys_to_ignore_on_load_unexpected")
                for p in (getattr(model, attr, None) or [])] + [r"rotary_emb\.inv_freq$"]
    return Expected(shapes, tied, optional, **plain)


def _fmt(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def compare(found: dict[str, Tensor], exp: Expected, root: Path) -> list[str]:
    """Problems of the checkpoint's names and shapes against config.json (empty when they match)."""
    cfg = root / "config.json"
    out: list[str] = []
    if exp.shapes is None:
        return _plain(found, exp, root)
    prefixes = {n.split(".", 1)[0] for n in exp.shapes if "." in n}
    names = dict(found)
    if found and not any(n.split(".", 1)[0] in prefixes for n in found) and "model" in prefixes:
        names = {f"model.{n}": t for n, t in found.items()}   # a base-model checkpoint: transformers adds the prefix

    def optional(name: str) -> bool:
        return any(re.search(p, name) for p in exp.optional)

    tied_of = {n: g for g in exp.tied for n in g}
    missing = sorted(n for n in exp.shapes if n not in names and not optional(n)
                     and not any(m in names for m in tied_of.get(n, ())))
    extra = sorted(n for n in names if n not in exp.shapes and not optional(n))
    wrong = [(n, names[n].shape, exp.shapes[n]) for n in sorted(exp.shapes) if n in names
             and names[n].shape != exp.shapes[n]]
    if wrong:
        n, got, want = wrong[0]
        more = f" (+{len(wrong) - 1} more)" if len(wrong) > 1 else ""
        out.append(f"{root / names[n].file}: {n} has shape {_fmt(got)}, {cfg} asks for {_fmt(want)}{more}; the "
                   "weights are of another model than config.json: copy the config.json that came with them")
    if missing:
        out.append(f"{root}: {len(missing)} tensor(s) {cfg} asks for are in no weight file "
                   f"({', '.join(missing[:SHOWN])}{', ...' if len(missing) > SHOWN else ''}); the weights are "
                   "incomplete or of a smaller model: copy every weight file again")
    if extra:
        out.append(f"{root}: {len(extra)} tensor(s) in the weight files are unknown to {cfg} "
                   f"({', '.join(extra[:SHOWN])}{', ...' if len(extra) > SHOWN else ''}); the weights are of "
                   "another (larger) model: copy the config.json that came with them")
    return out


def _plain(found: dict[str, Tensor], exp: Expected, root: Path) -> list[str]:
    """Where exact names are unknown: a vocab x hidden embedding and one block per config layer."""
    cfg, out = root / "config.json", []
    if exp.vocab and exp.hidden:
        embeds = {n: t.shape for n, t in found.items() if "embed" in n and len(t.shape) == 2}
        if embeds and (exp.vocab, exp.hidden) not in embeds.values():
            n, shape = sorted(embeds.items())[0]
            out.append(f"{root / found[n].file}: {n} has shape {_fmt(shape)}, {cfg} asks for vocab x hidden "
                       f"[{exp.vocab}, {exp.hidden}]; copy the config.json that came with the weights")
    if exp.layers:
        seen = {int(m.group(1)) for n in found for m in [_LAYER.search(n)] if m}
        if seen and seen != set(range(exp.layers)):
            out.append(f"{root}: the weight files hold layers {min(seen)}..{max(seen)} ({len(seen)} in all), {cfg} "
                       f"asks for {exp.layers} (num_hidden_layers); copy every shard, or the config.json that came "
                       "with the weights")
    return out


def weight_problems(root: str | Path, key: str | None = None) -> list[str]:
    """Every problem of the weights in `root` (one line each, `key: ` in front when given); [] = loadable.

    Assumes `root/config.json` exists (the tokenizer/config checks report a missing one)."""
    root = Path(root).expanduser()
    lead = f"{key}: " if key else ""
    try:
        found = checkpoint_tensors(root)
        exp = expected_tensors(root)
    except WeightsError as exc:
        return [f"{lead}{exc}"]
    except OSError as exc:
        return [f"{lead}{root}: weight files unreadable ({exc.strerror or exc}); check the directory's permissions"]
    if found is None:      # a .bin checkpoint: files checked, names and shapes only at load time
        return []
    return [f"{lead}{line}" for line in compare(found, exp, root)]


def check_weights(root: str | Path, key: str | None = None) -> None:
    """`weight_problems` as one PipelineError (the first problem, and how many more), for the stages'
    first model load: a file the preflight would refuse fails here in one line, not in transformers."""
    problems = weight_problems(root, key)
    if problems:
        more = f" (+{len(problems) - 1} more: `make preflight` lists them)" if len(problems) > 1 else ""
        raise WeightsError(problems[0] + more)
