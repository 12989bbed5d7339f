"""Reading the project's input files (traces, budget trees, scenarios, sweep grids) with one set
of clear messages: a directory, a missing or unreadable file, a binary or compressed file, text
that is not UTF-8, and YAML that does not parse or refers to itself through an alias.

Every function raises ``InputFileError`` with a message that does not yet name the file; the
caller prefixes it with the file (and turns it into its own error type), so that each reader
keeps its usual wording (``trace.csv, row 3: ...``, ``budgets.yaml: ...``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: Leading bytes of formats a user may pass by mistake, and what to say about them.
MAGIC = (
    (b"\x1f\x8b", "a gzip-compressed file", "decompress it first: gunzip"),
    (b"PK\x03\x04", "a zip archive", "extract the file from it first"),
    (b"\xfd7zXZ", "an xz-compressed file", "decompress it first: unxz"),
    (b"PAR1", "a Parquet file", "give it a .parquet name so that it is read as one"),
)
SNIFF_BYTES = 8192  # how much of a file is looked at to call it binary
#: Files shipped inside the package: scenarios, an example trace, an example budget tree.
DATA = Path(__file__).resolve().parent.parent / "data"


class InputFileError(ValueError):
    """A file that cannot be read as the text it should be; ``line`` is 1-based, if known."""

    def __init__(self, problem: str, line: int | None = None):
        super().__init__(problem)
        self.problem, self.line = problem, line


def find_input(path: str | Path) -> Path:
    """The file a user means by ``path``: the path itself (relative to the working directory)
    when it exists; else, for a bare file name, the shipped file of that name
    (``scenario-workshop-88.yaml``); else ``path`` unchanged, for the reader to report."""
    path = Path(path)
    if path.exists() or path.is_absolute() or len(path.parts) != 1:
        return path
    shipped = DATA / path
    return shipped if shipped.is_file() else path


def shipped_files(pattern: str = "*") -> list[Path]:
    """The shipped input files whose names match ``pattern``, sorted by name."""
    return sorted(p for p in DATA.glob(pattern) if p.is_file())


def read_bytes(path: Path) -> bytes:
    """The file's bytes; an ``InputFileError`` for a directory, a missing or unreadable file."""
    if path.is_dir():
        raise InputFileError("is a directory, not a file")
    try:
        return path.read_bytes()
    except OSError as err:
        raise InputFileError(f"cannot read: {err.strerror or err}") from None


def decode_text(data: bytes) -> str:
    """UTF-8 text (a byte-order mark is dropped); binary, compressed and non-UTF-8 files are
    named as such."""
    binary = binary_kind(data)
    if binary:
        raise InputFileError(f"{binary}, not a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InputFileError(
            f"not UTF-8 text (byte 0x{data[err.start]:02x} on line {line})", line
        ) from None


def binary_kind(data: bytes) -> str:
    """What a binary file is, with what to do about it ("a gzip-compressed file (decompress it
    first: gunzip)", "a binary file"), or "" for text."""
    for magic, what, advice in MAGIC:
        if data.startswith(magic):
            return f"{what} ({advice})"
    return "a binary file" if b"\x00" in data[:SNIFF_BYTES] else ""


def read_text(path: Path) -> str:
    """The file's text (see ``read_bytes`` and ``decode_text``)."""
    return decode_text(read_bytes(path))


def read_yaml(path: Path) -> Any:
    """The parsed YAML of a file; errors name the line, and a structure that contains itself
    (``&a`` ... ``*a`` inside itself) is refused rather than recursed into forever."""
    import yaml

    text = read_text(path)
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise InputFileError(
            f"not valid YAML{f' (line {line})' if line else ''}: {problem}", line
        ) from None
    _check_acyclic(spec)
    return spec


def _check_acyclic(spec: Any) -> None:
    """Refuse a mapping or list that contains itself (YAML aliases can build one)."""
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(spec, False)]
    while stack:
        node, leaving = stack.pop()
        if not isinstance(node, dict | list):
            continue
        if leaving:
            on_path.discard(id(node))
            continue
        if id(node) in on_path:
            raise InputFileError(
                "a YAML alias (*name) refers to a node that contains it: the structure "
                "would be infinite"
            )
        on_path.add(id(node))
        stack.append((node, True))
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, False) for child in children)


# ----- output paths ----------------------------------------------------------------------------
class OutputPathError(ValueError):
    """An output path that cannot be written, in one line that names it."""


def check_output_dir(path: str | Path) -> Path:
    """``path`` if it can be a results folder: an existing folder we may write in, or a new one
    whose parent is. Checked by creating (and removing) a scratch file, so a read-only mount or a
    pseudo-filesystem such as ``/proc`` is caught before any long run; creates nothing. The
    parent must exist: a typo in a path should fail here, not grow a tree of folders."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise OutputPathError(f"{path}: exists and is not a folder")
        _probe(path, path)
    else:
        _probe(_parent_folder(path), path)
    return path


def check_output_file(path: str | Path) -> Path:
    """``path`` if a file can be written there: not a folder, in an existing folder we may
    write in (see ``check_output_dir``); creates nothing."""
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(
            f"{path}: is a folder; give a file name (for example {path / 'report.html'})"
        )
    _probe(_parent_folder(path), path)
    if path.exists():
        try:
            with path.open("ab"):
                pass
        except OSError as err:
            raise OutputPathError(f"{path}: cannot be written ({err.strerror or err})") from None
    return path


def _parent_folder(path: Path) -> Path:
    """The existing folder a new ``path`` goes in; an error if it is missing or is a file."""
    parent = path.absolute().parent
    if not parent.exists():
        raise OutputPathError(f"{path}: the folder {parent} does not exist (create it first)")
    if not parent.is_dir():
        raise OutputPathError(f"{path}: {parent} is a file, not a folder")
    return parent


def _probe(folder: Path, path: Path) -> None:
    """Create and remove a scratch file in ``folder``; an error naming ``path`` if that fails."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".impactlab-probe-"):
            pass
    except OSError as err:
        raise OutputPathError(f"{path}: cannot write in {folder} ({err.strerror or err})") from None
