"""Trace loaders: public GPU-cluster traces, Slurm dumps and generic files -> the trace schema.

``load_trace(path, format=None, **options)`` returns the validated trace (docs/model.md section 3)
with its ``LoadReport`` as a plain dict in ``trace.attrs["load_report"]``; ``load`` returns
both as a ``Loaded``. Formats and their mappings are documented in docs/traces.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from ...base.files import find_input
from ..trace import TraceError
from . import acme, alibaba, generic, helios, philly, slurm
from .detect import detect_format
from .infer import KindRule, infer_kinds, projects_from_users
from .report import Loaded, LoadOptions, LoadReport

#: Format name -> loader.
FORMATS: dict[str, Callable[[Path, LoadOptions], Loaded]] = {
    "generic": generic.load,
    "philly": philly.load_csv,
    "philly-json": philly.load_json,
    "helios": helios.load,
    "acme": acme.load,
    "pai2020": alibaba.load_pai,
    "spot2026": alibaba.load_spot,
    "slurm": slurm.load,
}


def load(path: str | Path, format: str | None = None, **options: Any) -> Loaded:
    """Load a trace file of ``format`` (detected from the columns when None) with its report.

    ``options`` are the fields of ``LoadOptions`` (``max_gpus``, ``oversize``, ``on_bad``,
    ``max_duration_s``, ``kind_rule``, ``seed``, ``users_per_project``, ``sep``).
    """
    given, path = Path(path), find_input(path)
    if not path.exists():
        raise TraceError(
            str(path),
            None,
            None,
            "no such file"
            + (
                f" (looked in {Path.cwd()} and among the shipped files)"
                if len(given.parts) == 1
                else ""
            ),
        )
    name = format or detect_format(path)
    if name not in FORMATS:
        raise TraceError(
            str(path), None, None, f"unknown format {name!r}; choose from {sorted(FORMATS)}"
        )
    loaded = FORMATS[name](path, LoadOptions(**options))
    if path != given:  # a shipped file named by its bare name: reported by that name
        loaded = Loaded(loaded.trace, replace(loaded.report, source=str(given)))
    return loaded


def load_trace(path: str | Path, format: str | None = None, **options: Any) -> pd.DataFrame:
    """The validated trace in ``path``; its report is ``trace.attrs["load_report"]`` (a dict)."""
    loaded = load(path, format, **options)
    trace = loaded.trace
    trace.attrs["load_report"] = loaded.report.to_dict()
    return trace


__all__ = [
    "FORMATS",
    "KindRule",
    "LoadOptions",
    "LoadReport",
    "Loaded",
    "detect_format",
    "infer_kinds",
    "load",
    "load_trace",
    "projects_from_users",
]
