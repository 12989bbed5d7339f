"""What this process may really use: CPUs and memory, and how many workers a local pool gets.

``os.cpu_count()`` reports the host's cores. In a container (a Binder pod, a Kubernetes job, a
Slurm allocation) the process may use far fewer: its CPU affinity, the cgroup's CPU quota
(``cpu.max``) and memory limit (``memory.max``), and the ``CPU_LIMIT`` / ``MEM_LIMIT`` variables
that JupyterHub spawners set. A pool sized from the host's cores starts more workers than the
pod can run and, each holding a simulation, more than its memory holds.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

#: Where the runs of a sweep go: this process, a local process pool, or a Dask cluster.
Backend = Literal["serial", "processes", "dask"]
BACKENDS: tuple[Backend, ...] = ("serial", "processes", "dask")
#: Memory one pool worker is allowed for: the interpreter, the imported package and one run of
#: the workshop scenario peak at about 130 MiB; the rest is room for larger runs.
WORKER_BYTES = 256 * 2**20
#: What this (parent) process keeps for itself when the memory limit is shared with its workers.
PARENT_BYTES = 512 * 2**20
CGROUP = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Resources:
    """CPUs (possibly fractional, from a quota) and memory (bytes, None if unknown) this process
    may use, and where each figure came from."""

    cpus: float
    memory_bytes: int | None
    cpus_from: str
    memory_from: str

    def workers(self, tasks: int, per_worker_bytes: int = WORKER_BYTES) -> int:
        """Workers for ``tasks`` runs: at most one per usable CPU (at least one), and as many as
        the memory limit holds after the parent's share."""
        by_cpu = max(1, math.floor(self.cpus + 1e-9))
        if self.memory_bytes is None:
            by_memory = by_cpu
        else:
            by_memory = max(1, (self.memory_bytes - PARENT_BYTES) // per_worker_bytes)
        return max(1, min(tasks, by_cpu, by_memory))

    def describe(self) -> str:
        """One line: the figures and their sources."""
        memory = "unknown" if self.memory_bytes is None else f"{self.memory_bytes / 2**30:.1f} GiB"
        return f"{self.cpus:g} CPUs ({self.cpus_from}), memory {memory} ({self.memory_from})"


def resources(cgroup: Path = CGROUP, environ: dict[str, str] | None = None) -> Resources:
    """The CPUs and memory this process may use: the smallest of every limit that applies."""
    env = os.environ if environ is None else environ
    cpus = [(float(_affinity()), "CPU affinity")]
    cpus += [
        (v, s)
        for v, s in (_cgroup_cpus(cgroup), _env_number(env, "CPU_LIMIT"))
        if v is not None and v > 0
    ]
    memory = [
        (v, s)
        for v, s in (_cgroup_memory(cgroup), _env_number(env, "MEM_LIMIT"), _physical_memory())
        if v is not None and v > 0
    ]
    cpu, cpu_from = min(cpus)
    mem, mem_from = min(memory) if memory else (None, "no limit found")
    return Resources(cpu, None if mem is None else int(mem), cpu_from, mem_from)


def _affinity() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def _cgroup_cpus(root: Path) -> tuple[float | None, str]:
    """cgroup v2 ``cpu.max`` ("max 100000" or "150000 100000"), else v1's CFS quota."""
    fields = _read(root / "cpu.max").split()
    if len(fields) == 2 and fields[0] != "max":
        return _ratio(fields[0], fields[1]), "cgroup cpu.max"
    quota, period = (
        _read(root / "cpu" / "cpu.cfs_quota_us"),
        _read(root / "cpu" / "cpu.cfs_period_us"),
    )
    if quota and period and not quota.startswith("-"):
        return _ratio(quota, period), "cgroup cpu.cfs_quota_us"
    return None, ""


def _cgroup_memory(root: Path) -> tuple[float | None, str]:
    """cgroup v2 ``memory.max``, else v1's ``memory.limit_in_bytes`` (a huge value: no limit)."""
    for path, name in (
        (root / "memory.max", "cgroup memory.max"),
        (root / "memory" / "memory.limit_in_bytes", "cgroup memory.limit_in_bytes"),
    ):
        text = _read(path)
        if text.isdigit() and int(text) < 2**60:
            return float(text), name
    return None, ""


def _env_number(env: dict[str, str] | os._Environ[str], name: str) -> tuple[float | None, str]:
    """A positive number from the environment (``CPU_LIMIT=1.0``, ``MEM_LIMIT=2147483648``)."""
    text = env.get(name, "").strip()
    try:
        value = float(text)
    except ValueError:
        if text:
            log.warning("%s=%r is not a number; ignored", name, text)
        return None, ""
    return (value, name) if math.isfinite(value) and value > 0 else (None, "")


def _physical_memory() -> tuple[float | None, str]:
    try:
        return float(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")), "physical memory"
    except (AttributeError, ValueError, OSError):
        return None, ""


def _ratio(numerator: str, denominator: str) -> float | None:
    try:
        value = float(numerator) / float(denominator)
    except (ValueError, ZeroDivisionError):
        return None
    return value if value > 0 else None


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""
