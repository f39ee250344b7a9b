"""The values a doc marker cites: `source:key` references, a small expression language over them, and
how a value is written into prose.

Why: a number typed into docs/ goes stale on the next run and nothing notices; a marker names where
the number comes from (`rl:reward_gain.diff`, `params.yaml:curate.overfill`) and this module reads
it, so the doc can be regenerated and checked. Verdict words ("passes", "lower") are expressions over
the same values, so prose cannot contradict the metrics it sits beside.

Sources: `rl` is `metrics/rl.json`, `evaluate/rl` is `metrics/evaluate/rl.json`; a source ending in
`.json`, `.yaml` or `.yml` is a path from the repository root (`params.yaml:curate.overfill`).
Keys are dotted; a key that itself holds dots (`routed_accuracy_at_0.3`) resolves, list items are
indices (`rows.0.ppl_mean`, `-1` is the last) and `*` maps over every item (`answer_collapse.*.parsed`).
Expressions are Python syntax on these references: + - * / (spaces around a binary minus), comparisons,
and/or/not, `"a" if cond else "b"`, and the functions in `FUNCTIONS`.
"""
from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any, Callable

from decision_pipeline.common.errors import PipelineError
from decision_pipeline.common.io import loads_json
from decision_pipeline.common.textfile import decode
from decision_pipeline.common.yamlio import load_yaml

STRING = re.compile(r'"[^"]*"')
REF = re.compile(r"(?<![\w.])([A-Za-z_][\w.-]*(?:/[\w.-]+)*):((?:[\w>/-]+|\*)(?:\.(?:[\w>/-]+|\*))*)")
MINUS = "\u2212"


class Missing(PipelineError):
    """A cited file or key does not exist (the message says which and what to do)."""


class MissingFile(Missing):
    """A cited file does not exist; `rel` names it, so a doc citing it many times can say so once."""

    def __init__(self, rel: str):
        super().__init__(f"{rel} not found; the file was renamed or removed: cite its new path or delete the claim")
        self.rel = rel


def source_path(source: str) -> str:
    """`rl` -> `metrics/rl.json`; a path with a data-file suffix stays as written."""
    return source if source.endswith((".json", ".yaml", ".yml")) else f"metrics/{source}.json"


class Sources:
    """Metrics and params files under one root, each read once; every lookup names file and key on failure."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._files: dict[str, Any] = {}

    def data(self, rel: str) -> Any:
        if rel not in self._files:
            path = self.root / rel
            if not path.is_file():
                raise MissingFile(rel)
            text = decode(path.read_bytes(), rel)  # UTF-8 without a BOM: UTF-16 or a bad byte is one line
            if rel.endswith(".json"):
                self._files[rel] = loads_json(text, rel, "rerun the stage that writes it")
            else:
                self._files[rel] = load_yaml(text, rel)
        return self._files[rel]

    def get(self, source: str, key: str) -> Any:
        rel = source_path(source)
        return _resolve(self.data(rel), key.split("."), rel, key, "")


def _resolve(node: Any, parts: list[str], rel: str, key: str, done: str) -> Any:
    """Walk `parts` down `node`; dict keys may span several dotted parts (shortest match first)."""
    if not parts:
        return node
    head = parts[0]
    if head == "*":
        items = list(node.values()) if isinstance(node, dict) else node if isinstance(node, list) else None
        if items is None:
            raise Missing(_gone(rel, key, done, node))
        return [_resolve(item, parts[1:], rel, key, f"{done}.*" if done else "*") for item in items]
    if isinstance(node, list):
        try:
            return _resolve(node[int(head)], parts[1:], rel, key, f"{done}.{head}" if done else head)
        except (ValueError, IndexError):
            raise Missing(_gone(rel, key, done, node)) from None
    if isinstance(node, dict):
        first: Missing | None = None
        for j in range(1, len(parts) + 1):
            name = ".".join(parts[:j])
            if name in node:
                try:
                    return _resolve(node[name], parts[j:], rel, key, f"{done}.{name}" if done else name)
                except Missing as exc:
                    first = first or exc
        if first is not None:
            raise first
    raise Missing(_gone(rel, key, done, node))


def _gone(rel: str, key: str, done: str, node: Any) -> str:
    if isinstance(node, dict):
        have = ", ".join(sorted(map(str, node))[:12]) + (", ..." if len(node) > 12 else "")
    elif isinstance(node, list):
        have = f"a list of {len(node)} items"
    else:
        have = f"the value {node!r}"
    at = f"'{done}' holds" if done else "the top level holds"
    return (f"{rel} has no key '{key}' ({at} {have}); the metric was renamed or removed: "
            f"point the marker at its new key or delete the claim")


def _ci(x: Any) -> tuple[float, float]:
    """(low, high) of a CI dict: `ci_low`/`ci_high` or `ci95: [low, high]`."""
    if isinstance(x, dict) and "ci_low" in x and "ci_high" in x:
        return float(x["ci_low"]), float(x["ci_high"])
    if isinstance(x, dict) and isinstance(x.get("ci95"), list) and len(x["ci95"]) == 2:
        return float(x["ci95"][0]), float(x["ci95"][1])
    raise PipelineError(f"expected a value with ci_low/ci_high (or ci95), got {_short(x)}")


def _point(x: Any) -> float:
    for name in ("diff", "point"):
        if isinstance(x, dict) and name in x:
            return float(x[name])
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    raise PipelineError(f"expected a number or a value with diff/point, got {_short(x)}")


def detected(x: Any) -> bool:
    """A difference whose 95% CI excludes zero."""
    lo, hi = _ci(x)
    return lo > 0 or hi < 0


def direction(x: Any, up: str, down: str, none: str) -> str:
    """`up` when the CI lies above zero, `down` below it, else `none` (a bare number: its sign)."""
    if isinstance(x, dict):
        lo, hi = _ci(x)
        return up if lo > 0 else down if hi < 0 else none
    v = _point(x)
    return up if v > 0 else down if v < 0 else none


def _numbers(xs: Any) -> list[float]:
    if not isinstance(xs, list) or not xs:
        raise PipelineError(f"expected a non-empty list of numbers (a `*` key), got {_short(xs)}")
    return [_point(x) for x in xs]


def _many(args: tuple) -> list:
    """min/max arguments: one `*` list or several values; the winner keeps its type (an int stays an int)."""
    items = args[0] if len(args) == 1 else list(args)
    _numbers(items)
    return items


def _part(xs: Any, n: Any, tail: bool) -> list:
    """The first (or last) int(n) items of a list: a quarter of the rounds is `first(xs, len(xs) / 4)`."""
    k = int(_point(n))
    if not isinstance(xs, list) or not 1 <= k <= len(xs):
        raise PipelineError(f"first/last need a list (a `*` key) and 1 <= n <= its length, got n={k} of {_short(xs)}")
    return xs[len(xs) - k:] if tail else xs[:k]


def _pairs(labels: Any, values: Any) -> list[tuple[Any, float]]:
    if not isinstance(labels, list) or not isinstance(values, list) or len(labels) != len(values) or not labels:
        raise PipelineError(f"expected two `*` lists of one length, got {_short(labels)} and {_short(values)}")
    return list(zip(labels, _numbers(values)))


def _fail(message: str) -> Any:
    raise PipelineError(message)


def words(items: Any, none: str = "none") -> str:
    """A list as prose ("1.6, 2.2 and 3.2"; numbers as %g), or `none` when it is empty."""
    if not isinstance(items, list):
        raise PipelineError(f"words() needs a list, got {_short(items)}")
    text = [format(x, "g") if isinstance(x, (int, float)) and not isinstance(x, bool) else str(x) for x in items]
    return none if not text else text[0] if len(text) == 1 else ", ".join(text[:-1]) + " and " + text[-1]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "min": lambda *a: min(_many(a), key=_point),
    "max": lambda *a: max(_many(a), key=_point),
    "mean": lambda xs: sum(_numbers(xs)) / len(xs),
    "sum": lambda xs: sum(_numbers(xs)),
    "len": lambda xs: len(xs),
    "abs": lambda x: abs(_point(x)),
    "point": _point,
    "low": lambda x: _ci(x)[0],
    "high": lambda x: _ci(x)[1],
    "first": lambda xs, n: _part(xs, n, tail=False),
    "last": lambda xs, n: _part(xs, n, tail=True),
    "argmin": lambda labels, values: min(_pairs(labels, values), key=lambda p: p[1])[0],
    "argmax": lambda labels, values: max(_pairs(labels, values), key=lambda p: p[1])[0],
    "above": lambda labels, values, t: [k for k, v in _pairs(labels, values) if v > _point(t)],
    "below": lambda labels, values, t: [k for k, v in _pairs(labels, values) if v < _point(t)],
    "words": words,
    "keys": lambda x: list(x) if isinstance(x, dict) else _fail(f"keys() needs a mapping, got {_short(x)}"),
    "where": lambda labels, flags, want=True: [k for k, f in zip(labels, flags) if bool(f) == want]
    if isinstance(labels, list) and isinstance(flags, list) and len(labels) == len(flags)
    else _fail(f"where() needs two `*` lists of one length, got {_short(labels)} and {_short(flags)}"),
    "detected": detected,
    "direction": direction,
}

_BIN = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b}
_CMP = {ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b,
        ast.GtE: lambda a, b: a >= b, ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b}


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def evaluate(expr: str, sources: Sources) -> Any:
    """The value of a marker expression; a bad expression or a missing key raises with the reason."""
    strings: list[str] = []

    def keep_string(m: re.Match) -> str:
        strings.append(m.group(0)[1:-1])
        return f"__s{len(strings) - 1}"

    refs: list[tuple[str, str]] = []

    def keep_ref(m: re.Match) -> str:
        refs.append((m.group(1), m.group(2)))
        return f"__r{len(refs) - 1}"

    code = REF.sub(keep_ref, STRING.sub(keep_string, expr))
    try:
        tree = ast.parse(code.strip(), mode="eval")
    except (SyntaxError, ValueError):  # ValueError: a NUL byte in the expression
        raise PipelineError(f"cannot read the expression {cut(expr)!r} (refs are source:key, strings double-quoted, "
                            f"spaces around a binary minus)") from None
    except (RecursionError, MemoryError):
        raise PipelineError(f"the expression {cut(expr)!r} nests deeper than the parser reads; at most "
                            f"{MAX_DEPTH} levels: split it into simpler markers") from None
    depth = _depth(tree.body)
    if depth > MAX_DEPTH:
        raise PipelineError(f"the expression {cut(expr)!r} nests {depth} levels deep; at most {MAX_DEPTH}: split it "
                            "into simpler markers")
    names: dict[str, Any] = {}
    for i, (source, key) in enumerate(refs):
        names[f"__r{i}"] = sources.get(source, key)
    for i, text in enumerate(strings):
        names[f"__s{i}"] = text
    return _eval(tree.body, names, expr)


MAX_DEPTH = 100  # nested operators, calls and conditions of one marker (the evaluator recurses once per level)


def cut(expr: str, limit: int = 80) -> str:
    """An expression shortened for a one-line message."""
    text = " ".join(expr.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _depth(node: ast.AST) -> int:
    """How deep the expression tree goes (iteratively: a deep tree must not overflow the check itself)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(current))
    return deepest


def _eval(node: ast.AST, names: dict[str, Any], expr: str) -> Any:
    ev = lambda n: _eval(n, names, expr)  # noqa: E731
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, type(None))):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = ev(node.left), ev(node.right)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right)):
            raise PipelineError(f"arithmetic on a non-number ({_short(left)}, {_short(right)}) in {expr.strip()!r}")
        if isinstance(node.op, ast.Div) and right == 0:
            raise PipelineError(f"division by zero in {expr.strip()!r}")
        return _BIN[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_point(ev(node.operand))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not ev(node.operand)
    if isinstance(node, ast.BoolOp):
        values = [ev(v) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare) and all(type(op) in _CMP for op in node.ops):
        left = ev(node.left)
        for op, comp in zip(node.ops, node.comparators):
            right = ev(comp)
            if not _CMP[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.IfExp):
        return ev(node.body) if ev(node.test) else ev(node.orelse)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS and not node.keywords:
        return FUNCTIONS[node.func.id](*[ev(a) for a in node.args])
    what = f"the function {node.func.id!r}" if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
        else f"{type(node).__name__}"
    raise PipelineError(f"{what} is not allowed in the marker expression {expr.strip()!r} "
                        f"(functions: {', '.join(FUNCTIONS)}; operators + - * /, comparisons, and/or/not, if-else)")


def _number(value: float, spec: str) -> str:
    text = format(value, spec)
    if not any(c in "123456789" for c in text.split("e")[0]):
        text = text.lstrip("+-")              # no "+0.000" or "-0.000"
    return text.replace("-", MINUS)


def render(value: Any, spec: str | None) -> str:
    """A value as prose: numbers by `spec` (format mini-language, U+2212 minus), a CI dict as
    `point [low, high]`, a list as `[a, b]`, text as is, None as n/a."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        raise PipelineError('a true/false value needs words: write "yes words" if EXPR else "no words"')
    if isinstance(value, str):
        return value
    if isinstance(value, int) and spec is None:
        return _number(value, ",")
    if isinstance(value, (int, float)):
        if spec is None:
            raise PipelineError("a decimal needs a format: end the marker with one, e.g. %.3f, %+.3f or %.1%")
        if not math.isfinite(value):
            raise PipelineError(f"the value is {value}, not a finite number; rerun the stage that writes it")
        try:
            return _number(value, spec)
        except ValueError:
            raise PipelineError(f"%{spec} is not a number format (Python's format mini-language)") from None
    if isinstance(value, dict) and any(k in value for k in ("diff", "point")):
        lo, hi = _ci(value)
        inner = spec.replace("+", "") if spec else spec
        return f"{render(_point(value), spec)} [{render(lo, inner)}, {render(hi, inner)}]"
    if isinstance(value, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return "[" + ", ".join(render(v, spec) for v in value) + "]"
    raise PipelineError(f"cannot write {_short(value)} into prose; cite a number, text or a CI (diff/point with ci_low/ci_high)")
