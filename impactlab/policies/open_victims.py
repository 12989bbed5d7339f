"""An index of the running funded jobs that may be preempted now, per budget leaf and size.

A victim search for a blocked job used to scan every running job at every pass (on public-
trace shapes, hundreds of them, most protected or on the job's own side). With this index it
visits only unprotected jobs of leaves on the other side of the fair-share split, of sizes it
may break up, newest first; see ``Impactful.candidates``.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator

Entry = tuple[float, int]  # (start time, job): sorted ascending, walked newest first


class OpenVictims:
    """Running funded jobs whose protection has ended, by leaf and by GPUs held, in
    (start time, job) order. A protected job joins when its protection ends: the policy
    names it at start (``add``) and ``refresh(now)`` moves it over once due."""

    def __init__(self) -> None:
        self.leaves: dict[int, dict[int, list[Entry]]] = {}  # leaf -> held -> entries
        self._where: dict[int, tuple[int, int, Entry]] = {}  # open job -> (leaf, held, entry)
        self._due: list[tuple[float, float, int, int, int]] = []  # (until, start, job, leaf, held)
        self._attempt: dict[int, float] = {}  # running job -> its attempt's start time

    def __len__(self) -> int:
        return len(self._where)

    def add(self, j: int, leaf: int, held: int, start_s: float, until_s: float, end_s: float) -> None:
        """Funded job ``j`` started at ``start_s``, protected until ``until_s`` (it stays
        protected to its end if that comes first)."""
        self._attempt[j] = start_s
        if until_s <= start_s:
            self._open(j, leaf, held, start_s)
        elif until_s < end_s:
            heapq.heappush(self._due, (until_s, start_s, j, leaf, held))

    def remove(self, j: int) -> None:
        """Funded job ``j`` stopped running."""
        self._attempt.pop(j, None)
        where = self._where.pop(j, None)
        if where is not None:
            entries = self.leaves[where[0]][where[1]]
            del entries[bisect.bisect_left(entries, where[2])]

    def refresh(self, now: float, shielded: list[bool]) -> None:
        """Open the jobs whose protection ended by ``now`` (as ``shielded`` says)."""
        due, retry = self._due, []
        while due and due[0][0] <= now:
            entry = heapq.heappop(due)
            _, start_s, j, leaf, held = entry
            if self._attempt.get(j) != start_s or j in self._where:
                continue  # that attempt has ended
            if shielded[j]:
                retry.append(entry)  # its protection event has not fired yet
            else:
                self._open(j, leaf, held, start_s)
        for entry in retry:
            heapq.heappush(due, entry)

    def _open(self, j: int, leaf: int, held: int, start_s: float) -> None:
        entry = (start_s, j)
        sizes = self.leaves.get(leaf)
        if sizes is None:
            sizes = self.leaves[leaf] = {}
        entries = sizes.get(held)
        if entries is None:
            entries = sizes[held] = []
        if not entries or entries[-1] < entry:
            entries.append(entry)  # the usual case: the newest start
        else:
            bisect.insort(entries, entry)
        self._where[j] = (leaf, held, entry)

    def newest_first(self, leaves: list[tuple[int, int]]) -> Iterator[Entry]:
        """Entries of the given (leaf, held) lists merged, latest start first (ties: highest
        job first), as the victim order wants."""
        lists = [self.leaves[leaf][held] for leaf, held in leaves]
        if len(lists) == 1:
            return reversed(lists[0])
        return heapq.merge(*map(reversed, lists), reverse=True)
