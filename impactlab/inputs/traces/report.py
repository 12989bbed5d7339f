"""What a loader did: options it was given and the report it returns (rows read, skipped, inferred)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from ...base.units import DAY_S
from .infer import KindRule


@dataclass(frozen=True)
class LoadOptions:
    """How a loader treats input it cannot use as is; every loader takes the same options.

    ``max_gpus`` is the target cluster size: larger jobs raise a TraceError, or are skipped
    and reported with ``oversize="skip"``. ``on_bad="skip"`` skips (and reports) rows with an
    unparseable or impossible value instead of raising. ``seed`` and ``users_per_project``
    drive the rule that derives projects from users when a trace has none.
    """

    max_gpus: int | None = None
    oversize: Literal["error", "skip"] = "error"
    on_bad: Literal["error", "skip"] = "error"
    max_duration_s: float = 400 * DAY_S  # longer is taken as a broken record, not a job
    kind_rule: KindRule = field(default_factory=KindRule)
    seed: int = 0
    users_per_project: int = 4
    sep: str | None = None  # field delimiter; None = sniffed from the header line

    def __post_init__(self) -> None:
        if self.oversize not in ("error", "skip") or self.on_bad not in ("error", "skip"):
            raise ValueError("oversize and on_bad must be 'error' or 'skip'")
        if self.max_gpus is not None and self.max_gpus < 1:
            raise ValueError(f"max_gpus must be positive, got {self.max_gpus}")


@dataclass(frozen=True)
class LoadReport:
    """Rows read from a source, jobs kept, and every skipped row counted under its reason.

    Invariant: ``rows == jobs + sum(skipped.values())``; a row is counted once, under the
    first reason that applies. ``inferred`` names schema columns filled by a heuristic
    (e.g. ``kind``, ``project``); ``notes`` records vocabulary mappings worth knowing.
    """

    source: str
    format: str
    rows: int
    jobs: int
    skipped: dict[str, int] = field(default_factory=dict)
    inferred: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def skipped_total(self) -> int:
        """Rows skipped for any reason."""
        return sum(self.skipped.values())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (what ``load_trace`` puts in ``trace.attrs['load_report']``)."""
        return {
            "source": self.source,
            "format": self.format,
            "rows": self.rows,
            "jobs": self.jobs,
            "skipped": dict(self.skipped),
            "inferred": list(self.inferred),
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoadReport:
        """Inverse of ``to_dict``."""
        return cls(
            data["source"],
            data["format"],
            data["rows"],
            data["jobs"],
            dict(data["skipped"]),
            tuple(data["inferred"]),
            tuple(data["notes"]),
        )

    def lines(self) -> list[str]:
        """A readable account, one line per fact."""
        out = [f"{self.source} ({self.format}): {self.rows:,} rows, {self.jobs:,} jobs loaded"]
        out += [f"  skipped {n:,}: {reason}" for reason, n in self.skipped.items()]
        out += [f"  inferred: {col}" for col in self.inferred]
        out += [f"  note: {note}" for note in self.notes]
        return out


@dataclass(frozen=True)
class Loaded:
    """A loaded trace (validated schema) with its report."""

    trace: pd.DataFrame
    report: LoadReport
