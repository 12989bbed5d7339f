"""Maintenance plans from files: YAML (a list of windows) or CSV (one window per row).

A window has ``announce_h`` and ``down_h`` (hours from the start of the run), ``hours`` down
(default 4), either ``nodes`` (node numbers, from 0) or ``share`` (of the cluster's nodes),
``at_deadline`` (``stop`` or ``wait``), ``early`` (true: a node goes down as soon as it is
empty; false: not before ``down_h``), an optional ``name`` and, in a fleet, the ``cluster``
whose nodes it takes (none: its share of every cluster)::

    # maintenance.yaml
    - {name: rack-3, announce_h: 192, down_h: 216, hours: 6, nodes: [24, 25, 26, 27]}
    - {name: firmware, announce_h: 240, down_h: 240, hours: 2, share: 0.1, at_deadline: wait}

    # maintenance.csv (nodes separated by spaces or semicolons)
    name,announce_h,down_h,hours,nodes,share,at_deadline
    rack-3,192,216,6,24 25 26 27,,stop

Errors name the file, the window (row) and the field.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..base.config import Maintenance
from ..base.files import InputFileError, find_input, read_text, read_yaml
from ..base.params import FALSE_WORDS, TRUE_WORDS, ParamError

FIELDS = tuple(f.name for f in fields(Maintenance))
NUMBERS = ("announce_h", "down_h", "hours", "share")


class MaintenanceError(ValueError):
    """A maintenance plan that cannot be used; the message names the file, window and field."""


def load_maintenance(path: str | Path) -> tuple[Maintenance, ...]:
    """Read a maintenance plan (``.yaml``/``.yml`` or ``.csv``); see the module docstring."""
    given, path = str(path), find_input(path)
    try:
        if path.suffix.lower() == ".csv":
            rows, first = _csv_rows(read_text(path)), 2  # (row 1 is the header)
        else:
            rows, first = _yaml_rows(read_yaml(path)), 1
    except InputFileError as err:
        raise MaintenanceError(f"{given}: cannot read a maintenance plan: {err}") from None
    except MaintenanceError as err:
        raise MaintenanceError(f"{given}: {err}") from None
    if not rows:
        raise MaintenanceError(f"{given}: the plan has no window")
    plan = []
    for k, row in enumerate(rows):
        where = f"{given}, {'row' if path.suffix.lower() == '.csv' else 'window'} {k + first}"
        plan.append(window_from(row, where))
    return tuple(plan)


def window_from(row: dict[str, Any], where: str) -> Maintenance:
    """One window from a mapping of its fields (text or values), errors prefixed by ``where``."""
    unknown = sorted(set(row) - set(FIELDS))
    if unknown:
        raise MaintenanceError(f"{where}: unknown field(s) {unknown}; known: {list(FIELDS)}")
    values: dict[str, Any] = {}
    for name, value in row.items():
        if value is None or (isinstance(value, str) and not value.strip()):
            continue  # (an empty cell: the default)
        try:
            values[name] = _parse(name, value)
        except (TypeError, ValueError) as err:
            raise MaintenanceError(f"{where}, field '{name}': {err}") from None
    for name in ("announce_h", "down_h"):
        if name not in values:
            raise MaintenanceError(f"{where}, field '{name}': missing")
    try:
        return Maintenance(**values)
    except ParamError as err:
        raise MaintenanceError(f"{where}: {err}") from None


def _parse(name: str, value: Any) -> Any:
    if name in NUMBERS:
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"expected a finite number, got {value!r}")
        return number
    if name == "early":
        if isinstance(value, bool):
            return value
        word = str(value).strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"expected true or false, got {value!r}")
    if name == "nodes":
        parts: list[Any]
        if isinstance(value, str):
            parts = value.replace(";", " ").replace(",", " ").split()
        elif isinstance(value, int):
            parts = [value]
        else:
            parts = list(value)
        out = []
        for part in parts:
            if isinstance(part, float) or not str(part).strip().lstrip("-").isdigit():
                raise ValueError(f"node numbers are whole numbers, got {part!r}")
            out.append(int(part))
        return tuple(out)
    return str(value).strip()


def _yaml_rows(spec: Any) -> list[dict[str, Any]]:
    if isinstance(spec, dict) and "maintenance" in spec:
        spec = spec["maintenance"]
    if not isinstance(spec, list) or not all(isinstance(row, dict) for row in spec):
        raise MaintenanceError("a plan is a list of windows (mappings of their fields)")
    return spec


def _csv_rows(text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        raise MaintenanceError("the file is empty (expected a header row)")
    rows = []
    for row in reader:
        if None in row:
            raise MaintenanceError(
                f"row {reader.line_num}: more cells than the header's {len(reader.fieldnames)}"
            )
        rows.append({k.strip(): v for k, v in row.items()})
    return rows
