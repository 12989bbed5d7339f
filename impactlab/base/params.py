"""Declared parameters: every knob of a run, declared once with its range, unit and help.

A ``Param`` is the single declaration of one knob. Config dataclasses take their field
defaults from it (``Param.field()``), policies declare their knobs with ``knob(...)`` on their
own dataclass fields, and everything that shows or reads knobs is generated from the
declarations: CLI flags, scenario-file keys, validation messages, the Explorer's widgets, Voila
query-string presets and sweep axes.

This is the bottom layer: it imports nothing from the rest of the package.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Groups in the order people meet them (CLI help sections, widget tabs).
GROUPS = ("cluster", "workload", "trace", "policy", "latency", "sessions", "health")
#: The words read as true and as false, wherever a flag is written as text (the command line,
#: grid files, a trace's boolean columns), lower-cased.
TRUE_WORDS = frozenset({"1", "true", "t", "yes", "y", "on"})
FALSE_WORDS = frozenset({"0", "false", "f", "no", "n", "off"})
_NONE = {"", "none", "null", "off"}


class ParamError(ValueError):
    """A value outside a parameter's declared range, type or choices; says which and why."""


@dataclass(frozen=True)
class Param:
    """One knob: name, default, type, where it belongs and what values make sense."""

    name: str
    default: Any
    type: type
    group: str
    help: str
    unit: str = ""
    lo: float | None = None  # inclusive bounds
    hi: float | None = None
    step: float | None = None  # a sensible slider step
    choices: tuple[Any, ...] | None = None
    nullable: bool = False  # None is allowed and means "off" / "automatic" (see help)
    flag: str | None = None  # CLI flag, when it is not --name-with-dashes
    lo_open: bool = False  # lo itself is excluded (e.g. "positive")
    policies: tuple[str, ...] = ()  # for policy knobs: the policies that declare it
    ui: tuple[float, float] | None = None  # slider range when [lo, hi] is wider than people use

    @property
    def slider_range(self) -> tuple[float, float] | None:
        """The range a slider offers: ``ui``, else the declared bounds when both are finite."""
        if self.ui is not None:
            return self.ui
        if self.lo is not None and self.hi is not None and math.isfinite(self.hi):
            return (self.lo, self.hi)
        return None

    @property
    def cli_flag(self) -> str:
        """The command-line flag of this parameter."""
        return self.flag or "--" + self.name.replace("_", "-")

    def field(self, **kwargs: Any) -> Any:
        """A dataclass field with this parameter's default and the declaration in its metadata."""
        return dataclasses.field(default=self.default, metadata={"param": self}, **kwargs)

    def describe(self) -> str:
        """Help text with the unit, range or choices and the default (for --help and tooltips)."""
        parts = [self.help]
        if self.unit:
            parts.append(f"[{self.unit}]")
        if self.choices is not None:
            parts.append("one of " + ", ".join(map(str, self.choices)))
        elif self.lo is not None or self.hi is not None:
            parts.append(f"range {self._range()}")
        parts.append(f"(default {_show(self.default)})")
        return " ".join(parts)

    def _range(self) -> str:
        lo = "-inf" if self.lo is None else _show(self.lo)
        hi = "inf" if self.hi is None else _show(self.hi)
        return f"{'(' if self.lo_open else '['}{lo}, {hi}]"

    def parse(self, text: str | Any) -> Any:
        """A value from text (CLI, query string, YAML scalar), converted and checked."""
        if not isinstance(text, str):
            return self.check(text)
        raw = text.strip()
        if self.nullable and raw.lower() in _NONE:
            return None
        try:
            value: Any = _convert(self.type, raw)
        except ValueError:
            raise ParamError(f"{self.name}: expected {self.type.__name__}, got {text!r}") from None
        return self.check(value)

    def check(self, value: Any) -> Any:
        """``value`` converted to the declared type if it is a plain widening; else ParamError."""
        if value is None:
            if self.nullable:
                return None
            raise ParamError(f"{self.name} must be set (no 'none' allowed)")
        value = self._coerce(value)
        if self.choices is not None and value not in self.choices:
            raise ParamError(f"{self.name} must be one of {list(self.choices)}, got {value!r}")
        if self.type in (int, float):
            self._check_range(value)
        return value

    def _coerce(self, value: Any) -> Any:
        if self.type is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if self.type is int and isinstance(value, float) and value.is_integer():
            return int(value)
        if self.type is int and hasattr(value, "__index__") and not isinstance(value, bool):
            return int(value)
        if self.type is bool and hasattr(value, "__bool__") and type(value).__name__ == "bool_":
            return bool(value)  # numpy bool
        if self.type is float and hasattr(value, "__float__") and not isinstance(value, bool | str):
            return float(value)  # numpy floats
        if not isinstance(value, self.type) or (self.type is not bool and isinstance(value, bool)):
            raise ParamError(f"{self.name} must be {self.type.__name__}, got {value!r}")
        return value

    def _check_range(self, value: float) -> None:
        if isinstance(value, float) and math.isnan(value):
            raise ParamError(f"{self.name} must be a number, got nan")
        below = self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo)
        above = self.hi is not None and value > self.hi
        if below and self.lo == 0 and self.hi is None:
            raise ParamError(
                f"{self.name} must be {'positive' if self.lo_open else '>= 0'}, got {_show(value)}"
            )
        if below or above:
            raise ParamError(f"{self.name} must be in {self._range()}, got {_show(value)}")


def knob(default: Any, type: type, help: str, unit: str = "", **spec: Any) -> Any:
    """A policy dataclass field declaring one knob (name and group are filled in on lookup)."""
    return Param("", default, type, "", help, unit, **spec).field()


def declared(cls: type) -> list[Param]:
    """The parameters declared on a dataclass's fields (``Param.field()`` or ``knob``), named
    after the fields; a knob's group is the class's registered ``name`` when it has one."""
    out = []
    group = getattr(cls, "name", "")
    for f in dataclasses.fields(cls):
        param = f.metadata.get("param")
        if param is None:
            continue
        if not param.name:  # a policy knob: named and grouped by where it is used
            param = dataclasses.replace(
                param, name=f.name, group=group, default=f.default, policies=(group,)
            )
        out.append(param)
    return out


def check_fields(obj: Any) -> None:
    """Check every declared field of a dataclass instance; set the converted value in place."""
    for f in dataclasses.fields(obj):
        param = f.metadata.get("param")
        if param is not None:
            value = _named(param, f.name).check(getattr(obj, f.name))
            object.__setattr__(obj, f.name, value)


def _named(param: Param, name: str) -> Param:
    return param if param.name else dataclasses.replace(param, name=name)


def merge_knobs(params: Sequence[Param]) -> list[Param]:
    """One entry per knob name across policies (``policies`` lists who declares it; the
    default shown is the first policy's)."""
    merged: dict[str, Param] = {}
    for p in params:
        seen = merged.get(p.name)
        merged[p.name] = (
            p if seen is None else dataclasses.replace(seen, policies=seen.policies + p.policies)
        )
    return list(merged.values())


def iter_groups(params: Sequence[Param]) -> Iterator[tuple[str, list[Param]]]:
    """Parameters grouped in ``GROUPS`` order, then policy groups alphabetically."""
    groups: dict[str, list[Param]] = {}
    for p in params:
        groups.setdefault(p.group, []).append(p)
    order = [g for g in GROUPS if g in groups] + sorted(g for g in groups if g not in GROUPS)
    for g in order:
        yield g, groups[g]


class FrozenMap(Mapping[str, Any]):
    """A read-only, hashable mapping (policy knobs, budget shares inside a frozen config)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = dict(sorted((items or {}).items()))

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return repr(self._items)


def _convert(kind: type, raw: str) -> Any:
    if kind is bool:
        if raw.lower() in TRUE_WORDS:
            return True
        if raw.lower() in FALSE_WORDS:
            return False
        raise ValueError(raw)
    if kind is int:
        return int(float(raw)) if float(raw).is_integer() else int(raw)
    return kind(raw)


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return "none" if value is None else str(value)


# ----- parameters in words ---------------------------------------------------------------------
#: Labels that say more, or say it shorter, than the parameter's name does (the unit is added).
LABELS = {
    "funded_load": "funded",
    "pretrain_chain_mean": "runs per campaign",
    "trace_days": "trace length",
    "cycle_s": "scheduling cycle",
    "opt_out_long": "opt-out, jobs > 8 h",
    "opt_out_short": "opt-out, shorter jobs",
    "session_resubmit_share": "sessions resubmitted",
    "session_resubmit_delay_s": "resubmit delay",
    "warmup_days": "warm-up",
    "mtbf_hours": "node MTBF",
    "detect_hours": "detection",
    "crash_s": "crash after",
    "half_life_days": "half-life",
    "cap_hours": "protection cap",
    "cap_hours_interactive": "interactive cap",
    "reserve_min_nodes": "reserve from",
}
#: Words of a name as a label writes them.
WORDS = {"gpus": "GPUs", "mtbf": "MTBF"}
#: The word that ends a name when it only repeats the unit (``restart_overhead_s``, ``window_days``).
UNIT_WORDS = {
    "s": ("s",),
    "h": ("h", "hours"),
    "days": ("days",),
    "GPUs": ("gpus",),
    "nodes": ("nodes",),
    "jobs": ("jobs",),
}
#: How units read in a label.
UNIT_TEXT = {"x capacity": "\u00d7 capacity", "x": "\u00d7"}


def label(param: Param) -> str:
    """A parameter in words, with its unit, for a control or an axis (``restart_overhead_s`` ->
    "restart overhead (s)", ``cap_hours`` -> "protection cap (h)", ``gpus`` -> "GPUs")."""
    words, unit = param.name.split("_"), param.unit
    if len(words) > 1 and words[-1] in UNIT_WORDS.get(unit, ()):
        words = words[:-1]
    text = LABELS.get(param.name) or " ".join(WORDS.get(word, word) for word in words)
    if not unit or unit.lower() in text.lower().split():  # "GPUs", "GPUs per node": said already
        return text
    return f"{text} ({UNIT_TEXT.get(unit, unit)})"
