"""Which loader reads a file: from its name, its header line or (JSON) its first job."""

from __future__ import annotations

from pathlib import Path

from ...base.files import binary_kind
from ..trace import REQUIRED, TraceError
from .table import sniff_separator

#: Columns that identify a format, checked in order (the first format whose columns are all
#: in the header wins).
SIGNATURES: tuple[tuple[str, frozenset[str]], ...] = (
    ("generic", frozenset(REQUIRED)),
    ("slurm", frozenset({"JobID", "AllocTRES"})),
    ("slurm", frozenset({"JobID", "AllocGRES"})),  # (a Slurm that does not account GPUs as TRES)
    ("spot2026", frozenset({"job_name", "organization", "gpu_request", "worker_num", "job_type"})),
    ("pai2020", frozenset({"job_name", "inst_id", "status", "start_time"})),
    ("acme", frozenset({"job_id", "type", "gpu_num", "submit_time"})),
    ("helios", frozenset({"job_id", "vc", "gpu_num", "submit_time"})),
    ("philly", frozenset({"timestamp", "num_gpus", "duration"})),
)


def detect_format(path: Path) -> str:
    """The name of the format of ``path`` (see ``SIGNATURES``), or a TraceError listing the columns."""
    if path.is_dir():
        if not (path / "pai_job_table.csv").exists():
            raise TraceError(
                str(path),
                None,
                None,
                "is a directory; give a trace file (only an Alibaba PAI "
                "2020 folder, holding pai_job_table.csv and "
                "pai_task_table.csv, can be given as a folder)",
            )
        return "pai2020"
    if path.name.startswith(("pai_job_table", "pai_task_table")):
        return "pai2020"
    if path.suffix.lower() in (".parquet", ".pq"):
        return "generic"
    if path.suffix.lower() == ".json":
        return "philly-json"
    text = _head(path)
    if text.lstrip().startswith(("[", "{")):
        return "philly-json"
    header = text.split("\n", 1)[0].rstrip("\r")
    columns = {c.strip().strip('"') for c in header.split(sniff_separator(header))}
    for name, needed in SIGNATURES:
        if needed <= columns:
            return name
    raise TraceError(
        str(path),
        1,
        None,
        f"cannot tell the trace format from the columns {sorted(columns)}; "
        "pass format= (see impactlab.inputs.traces.FORMATS)",
    )


def _head(path: Path) -> str:
    """The first few KB of the file as text (enough for the header line); a binary file is
    named as such."""
    try:
        with path.open("rb") as handle:
            data = handle.read(65_536)
    except OSError as err:
        raise TraceError(str(path), None, None, f"cannot read: {err.strerror or err}") from None
    if not data.strip():
        raise TraceError(str(path), None, None, "the file is empty")
    binary = binary_kind(data)
    if binary:
        raise TraceError(str(path), None, None, f"{binary}, not a text trace")
    return data.decode("utf-8-sig", errors="replace")
