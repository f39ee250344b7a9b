"""Files people write (params, profiles, prompts, JSONL imports, S1MB files): one encoding rule.

The rule: such a file is UTF-8 **without** a byte-order mark. A BOM (UTF-8, UTF-16 or UTF-32),
UTF-16/32 text without one, or a byte that is not UTF-8 is refused with one line that names the
file (the line and the byte where it helps) and says how to save it; nothing is stripped or guessed.

Why refuse rather than strip: common editors (Notepad, Excel's "UTF-8 CSV", some IDEs) add a BOM,
and before this the readers failed far from the cause ("missing front matter", "fix or remove the
line", a UnicodeDecodeError traceback for UTF-16). Stripping would make two different byte strings
one file for some readers and not others (DVC hashes the bytes; the YAML reader already refused a
BOM, common/yamlio.py); naming the BOM costs the person one "save as UTF-8" and keeps every reader
agreeing on what the file says.
"""
from __future__ import annotations

import codecs
from pathlib import Path

from decision_pipeline.common.errors import PipelineError

SAVE_AS = "save it as UTF-8 without a byte-order mark (BOM)"
_BOMS = (  # longest first: the UTF-32 LE mark starts with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "UTF-32 (little-endian) with a byte-order mark"),
    (codecs.BOM_UTF32_BE, "UTF-32 (big-endian) with a byte-order mark"),
    (codecs.BOM_UTF8, "UTF-8 with a byte-order mark (BOM)"),
    (codecs.BOM_UTF16_LE, "UTF-16 (little-endian) with a byte-order mark"),
    (codecs.BOM_UTF16_BE, "UTF-16 (big-endian) with a byte-order mark"),
)
SNIFF_BYTES = 4096


def encoding_problem(head: bytes) -> str | None:
    """What is wrong with the encoding of a file starting with `head` ('is UTF-16 ...'), or None.

    UTF-16 without a BOM is valid UTF-8 byte for byte when the text is ASCII (NULs in between),
    so it is recognised by its pattern of NUL bytes, not by a decoding error."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return f"is {name}"
    head = head[:SNIFF_BYTES]
    if b"\x00" not in head:
        return None
    even, odd = head[0::2], head[1::2]
    if odd and odd.count(0) >= 0.6 * len(odd) and even.count(0) < 0.2 * len(even):
        return "is UTF-16 (little-endian) text"
    if even and even.count(0) >= 0.6 * len(even) and odd.count(0) < 0.2 * max(len(odd), 1):
        return "is UTF-16 (big-endian) text"
    return f"holds a NUL byte at byte {head.index(0) + 1}: not a text file (or not UTF-8)"


def decode_problem(data: bytes, exc: UnicodeDecodeError) -> str:
    """'line L, byte B (0xNN)' of the first byte of `data` that is not UTF-8 (B counts from 1 within the line)."""
    line = data.count(b"\n", 0, exc.start) + 1
    column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
    return f"line {line}, byte {column} (0x{data[exc.start]:02x}) is not UTF-8"


def decode(data: bytes, where: str) -> str:
    """`data` (a whole file's bytes) as text under the rule above; a PipelineError names `where`."""
    problem = encoding_problem(data[:SNIFF_BYTES])
    if problem:
        raise PipelineError(f"{where}: {problem}; {SAVE_AS}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PipelineError(f"{where}: {decode_problem(data, exc)}; save the file as UTF-8") from None


def read_text(path: str | Path, missing: str = "file not found") -> str:
    """The text of a person-written file under the rule above (newlines kept as written)."""
    path = Path(path)
    if path.is_dir():
        raise PipelineError(f"{path}: is a directory; expected a text file")
    if not path.is_file():
        raise PipelineError(f"{path}: {missing}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PipelineError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return decode(data, str(path))


def check_head(path: str | Path) -> None:
    """Refuse a file whose first bytes break the rule (a BOM, UTF-16): for line-wise readers, which
    otherwise meet the BOM as 'malformed JSON' on line 1 or UTF-16 as a NUL-riddled line."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return  # the reader itself names a missing or unreadable file
    problem = encoding_problem(head)
    if problem:
        raise PipelineError(f"{path}: {problem}; {SAVE_AS}")


def decode_line(raw: bytes, path: str | Path, lineno: int) -> str:
    """One line of a line-wise reader; a bad byte names file, line and byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PipelineError(f"{path}:{lineno}: byte {exc.start + 1} of the line (0x{raw[exc.start]:02x}) is "
                            "not UTF-8; save the file as UTF-8") from None
