"""An index of the running funded jobs that may be preempted now, per budget node and size.

Without it, a victim search for a blocked job would scan every running job at every pass
(hundreds on a busy cluster, most protected or on the job's own side). With this index it
visits only unprotected jobs under the other side of each fair-share split, of sizes it may
break up, newest first; see ``Impactful.candidates``.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator

Entry = tuple[float, int]  # (start time, job): sorted ascending, walked newest first
Size = tuple[int, bool]  # (GPUs held, runs only on the interactive reserve)
Pending = tuple[float, float, int, tuple[int, ...], Size]  # (due, start, job, nodes, size)


class OpenVictims:
    """Running funded jobs that may be preempted now, under every budget node on their path
    (the root aside) and by size (GPUs held, and whether the job runs only on the interactive
    reserve: most searches may not free it), in (start time, job) order. The policy names a
    job at its start (``add``); ``refresh(now)`` moves it over once it may be preempted: once
    time has moved past its start (a job is never a victim at the instant it starts, nor
    before it begins) and its protection, if any, has ended. So every job in the index can
    be drawn by a search at ``now``, and its smallest sizes are the smallest drawable."""

    def __init__(self) -> None:
        self.lists: dict[tuple[int, Size], list[Entry]] = {}  # (budget node, size) -> entries
        self.sizes: dict[int, list[Size]] = {}  # budget node -> sorted sizes it has entries of
        self._where: dict[
            int, tuple[tuple[int, ...], Size, Entry]
        ] = {}  # open job -> (nodes, size, entry)
        self._due: list[Pending] = []  # protected jobs, by the end of their protection
        self._fresh: list[Pending] = []  # unprotected jobs, by their start
        self._attempt: dict[int, float] = {}  # running job -> its attempt's start time
        # budget node -> GPUs the open jobs under it hold (the most a walk can free there)
        self.gpus: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._where)

    def add(
        self,
        j: int,
        nodes: tuple[int, ...],
        size: Size,
        start_s: float,
        until_s: float,
        end_s: float,
    ) -> None:
        """Funded job ``j`` (under budget ``nodes``) started at ``start_s``, protected until
        ``until_s`` (it stays protected to its end if that comes first)."""
        self._attempt[j] = start_s
        if until_s <= start_s:
            heapq.heappush(self._fresh, (start_s, start_s, j, nodes, size))
        elif until_s < end_s:
            heapq.heappush(self._due, (until_s, start_s, j, nodes, size))

    def remove(self, j: int) -> None:
        """Funded job ``j`` stopped running."""
        self._attempt.pop(j, None)
        where = self._where.pop(j, None)
        if where is None:
            return
        nodes, size, entry = where
        gpus = self.gpus
        for node in nodes:
            gpus[node] -= size[0]
            entries = self.lists[node, size]
            del entries[bisect.bisect_left(entries, entry)]
            if not entries:
                self.sizes[node].remove(size)

    def refresh(self, now: float, shielded: list[bool]) -> None:
        """Open the jobs that may be preempted at ``now``: unprotected ones started before it,
        and those whose protection ended by then (as ``shielded`` says)."""
        fresh, due = self._fresh, self._due
        if fresh and fresh[0][0] < now:
            self._admit(fresh, now, shielded, at_now=False)
        if due and due[0][0] <= now:
            self._admit(due, now, shielded, at_now=True)

    def _admit(self, heap: list[Pending], now: float, shielded: list[bool], at_now: bool) -> None:
        """Open the entries of ``heap`` due before ``now`` (or at it, ``at_now``). An entry whose
        job is still shielded is kept: its protection event has not fired yet."""
        retry = []
        while heap and (heap[0][0] <= now if at_now else heap[0][0] < now):
            entry = heapq.heappop(heap)
            _, start_s, j, nodes, size = entry
            if self._attempt.get(j) != start_s or j in self._where:
                continue  # that attempt has ended
            if shielded[j]:
                retry.append(entry)
            else:
                self._open(j, nodes, size, start_s)
        for entry in retry:
            heapq.heappush(heap, entry)

    def _open(self, j: int, nodes: tuple[int, ...], size: Size, start_s: float) -> None:
        entry = (start_s, j)
        gpus = self.gpus
        for node in nodes:
            gpus[node] = gpus.get(node, 0) + size[0]
            entries = self.lists.get((node, size))
            if entries is None:
                entries = self.lists[node, size] = []
            if not entries:
                bisect.insort(self.sizes.setdefault(node, []), size)
            if not entries or entries[-1] < entry:
                entries.append(entry)  # the usual case: the newest start
            else:
                bisect.insort(entries, entry)
        self._where[j] = (nodes, size, entry)

    def eligible(self, node: int, largest: float, reserve_too: bool) -> list[Size]:
        """The sizes of at most ``largest`` GPUs with entries under ``node``, smallest first;
        those of jobs only on the reserve if ``reserve_too``."""
        sizes = self.sizes.get(node)
        if not sizes:
            return []
        sizes = sizes[: bisect.bisect_right(sizes, (largest, True))]
        return sizes if reserve_too else [size for size in sizes if not size[1]]

    def smallest(self, node: int, largest: float, reserve_too: bool) -> int | None:
        """The GPUs of the first size ``eligible`` would return (None: it returns none),
        without building the list."""
        for held, on_reserve in self.sizes.get(node, ()):
            if held > largest:
                return None
            if reserve_too or not on_reserve:
                return held
        return None

    def newest_first(self, streams: list[tuple[int, Size]]) -> Iterator[tuple[float, int, int]]:
        """(start, job, budget node) of the given (budget node, size) lists merged, latest
        start first (ties: highest job first), as the victim order wants. Each entry is tagged
        with its own list's budget node (a group of sides with equal fair-share values merges
        several)."""
        tagged = [self._tagged(key) for key in streams]
        return tagged[0] if len(tagged) == 1 else heapq.merge(*tagged, reverse=True)

    def _tagged(self, key: tuple[int, Size]) -> Iterator[tuple[float, int, int]]:
        node = key[0]  # (bound here: a comprehension's generators would all see its last value)
        return ((s, v, node) for s, v in reversed(self.lists[key]))
