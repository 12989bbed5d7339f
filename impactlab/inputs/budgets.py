"""Budget trees: shares, entitlement, Fair Tree ranking and owed water-filling (docs/model.md section 4)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from ..base.files import InputFileError, find_input, read_yaml

if TYPE_CHECKING:
    import pandas as pd

ROOT = 0
#: Values per budget node: plain floats, or the rows of a node-major array.
ByNode = TypeVar("ByNode", list[float], np.ndarray)
OWED_BLOCK_ROWS = 1 << 15  # instants water-filled at once (``BudgetTree.owed_rates``)
NODE_KEYS = frozenset({"name", "share", "children", "users"})


#: The smallest entitled fraction of the cluster a budget node may have (a trillionth: far below
#: any real budget, far above where the fair-share ratios lose their precision).
SMALLEST_FRACTION = 1e-12


class BudgetError(ValueError):
    """A budget tree that cannot be used; the message names the source and node."""


@dataclass(frozen=True)
class BudgetTree:
    """A tree of budget nodes; node 0 is the root and leaves are projects.

    ``share`` is the raw share a manager wrote; ``fraction`` is the entitled fraction of the
    cluster, the product of sibling-normalised shares down the path.
    """

    names: tuple[str, ...]
    parent: tuple[int, ...]
    share: tuple[float, ...]
    #: Informational: (project, users) for projects whose YAML lists ``users``. The scheduler's
    #: leaves stay projects; a job is charged to its ``project`` whoever submits it.
    users: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any], source: str = "budgets") -> BudgetTree:
        """Build from nested ``{name, share, children: [...], users: [...]}`` mappings (the YAML form)."""
        names: list[str] = []
        parent: list[int] = []
        share: list[float] = []
        members: list[tuple[str, tuple[str, ...]]] = []

        def add(node: Mapping[str, Any], up: int, path: str) -> None:
            if not isinstance(node, Mapping):
                raise BudgetError(
                    f"{source}: under '{path or '/'}': a node is a mapping with a name, got {node!r}"
                )
            raw_name = node.get("name")
            if isinstance(raw_name, bool) or not isinstance(raw_name, (str, int)):
                given = "" if raw_name is None else f" (got {raw_name!r})"
                raise BudgetError(f"{source}: node under '{path or '/'}' has no name{given}")
            name = str(raw_name).strip()
            if not name:
                raise BudgetError(f"{source}: node under '{path or '/'}' has no name")
            extra = sorted(set(node) - NODE_KEYS)
            if extra:
                raise BudgetError(
                    f"{source}: node '{name}': unknown key(s) {extra}; allowed {sorted(NODE_KEYS)}"
                )
            kids = node.get("children", None) or ()
            if not isinstance(kids, Sequence) or isinstance(kids, str):
                raise BudgetError(f"{source}: node '{name}': children must be a list of nodes")
            if node.get("users") is not None:
                if kids:
                    raise BudgetError(
                        f"{source}: node '{name}': users belong to projects (leaves), not to groups"
                    )
                members.append((name, _user_names(node["users"], name, source)))
            raw = node.get("share", 1.0)
            try:
                if isinstance(raw, bool):  # (YAML's yes/no: float() would take them)
                    raise TypeError
                value = float(raw)
            except (TypeError, ValueError):
                raise BudgetError(
                    f"{source}: node '{name}': share must be a number, got {raw!r}"
                ) from None
            if not value > 0 or not np.isfinite(value):
                raise BudgetError(
                    f"{source}: node '{name}': share must be a positive number, got {raw!r}"
                )
            names.append(name)
            parent.append(up)
            share.append(value)
            me = len(names) - 1
            for child in kids:
                add(child, me, f"{path}/{name}")

        add({"share": 1.0, **spec, "name": spec.get("name", "root")}, -1, "")
        tree = cls(tuple(names), tuple(parent), tuple(share), tuple(members))
        tree._check_unique_leaves(source)
        tree._check_fractions(source)
        return tree

    @classmethod
    def flat(cls, shares: Mapping[str, float]) -> BudgetTree:
        """A one-level tree: every project directly under the root."""
        return cls.from_dict(
            {"name": "root", "children": [{"name": p, "share": s} for p, s in shares.items()]}
        )

    @classmethod
    def from_yaml(cls, path: str | Path) -> BudgetTree:
        """A validated budget tree from a YAML file (a bare tree, or a scenario's ``budgets`` key)."""
        path = find_input(path)
        try:
            spec = read_yaml(path)
        except InputFileError as err:
            raise BudgetError(f"{path}: cannot read budget tree: {err}") from None
        if isinstance(spec, dict) and "budgets" in spec:  # a scenario file
            spec = spec["budgets"]
        if not isinstance(spec, dict):
            raise BudgetError(f"{path}: a budget tree is a mapping with 'name' and 'children'")
        tree = cls.from_dict(spec, source=str(path))
        if not tree.leaves:
            raise BudgetError(f"{path}: the tree has no projects: every job would run unallocated")
        return tree

    def to_dict(self) -> dict[str, Any]:
        """The nested mapping form, inverse of ``from_dict``."""

        def node(i: int) -> dict[str, Any]:
            out: dict[str, Any] = {"name": self.names[i], "share": self.share[i]}
            if self.children[i]:
                out["children"] = [node(c) for c in self.children[i]]
            elif self.names[i] in members:
                out["users"] = list(members[self.names[i]])
            return out

        members = dict(self.users)

        return node(ROOT)

    def with_shares(self, shares: Mapping[str, float]) -> BudgetTree:
        """A copy with the raw shares of the named nodes replaced (``{"p01": 3.0}``)."""
        unknown = sorted(set(shares) - set(self.names))
        if unknown:
            raise BudgetError(
                f"budget shares: no node named {unknown} in the tree; nodes: {list(self.names)}"
            )
        if not shares:
            return self

        def node(spec: dict[str, Any]) -> dict[str, Any]:
            kids = [node(c) for c in spec.get("children", ())]
            return {
                **spec,
                "share": float(shares.get(spec["name"], spec["share"])),
                **({"children": kids} if kids else {}),
            }

        return BudgetTree.from_dict(node(self.to_dict()), source="budget shares")

    def _check_fractions(self, source: str) -> None:
        """Every node's entitled fraction must be a number fair share can rank by (it divides
        by it): shares far apart among siblings (1e-300 beside 1e300) would round it to 0."""
        fraction = self.fraction
        for node in range(1, self.size):
            if not fraction[node] >= SMALLEST_FRACTION:
                siblings = [self.share[c] for c in self.children[self.parent[node]]]
                raise BudgetError(
                    f"{source}: node '{self.names[node]}': share {self.share[node]:g} among "
                    f"siblings' shares totalling {sum(siblings):g} entitles it to "
                    f"{fraction[node]:.3g} of the cluster, below the smallest fair share can "
                    f"rank ({SMALLEST_FRACTION:g}): bring the shares closer together"
                )

    def _check_unique_leaves(self, source: str) -> None:
        seen: set[tuple[int, str]] = set()
        for leaf in self.leaves:
            key = (self.parent[leaf], self.names[leaf])
            if key in seen:
                raise BudgetError(
                    f"{source}: '{self.names[leaf]}' appears twice under '{self.names[key[0]]}'"
                )
            seen.add(key)

    # ----- structure -------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Number of nodes, root included."""
        return len(self.names)

    @cached_property
    def children(self) -> tuple[tuple[int, ...], ...]:
        """Children of every node, in the order written."""
        kids: list[list[int]] = [[] for _ in self.names]
        for i, p in enumerate(self.parent):
            if p >= 0:
                kids[p].append(i)
        return tuple(tuple(k) for k in kids)

    @cached_property
    def leaves(self) -> tuple[int, ...]:
        """Leaf nodes (projects), in depth-first order."""
        kids = self.children
        return tuple(i for i in range(1, self.size) if not kids[i])

    @cached_property
    def leaf_of(self) -> dict[str, int]:
        """Project name -> leaf node, for leaf names that appear once."""
        counts = Counter(self.names[i] for i in self.leaves)
        return {self.names[i]: i for i in self.leaves if counts[self.names[i]] == 1}

    @cached_property
    def _ambiguous(self) -> frozenset[str]:
        """Leaf names that appear under more than one node (fine for users, not for projects)."""
        counts = Counter(self.names[i] for i in self.leaves)
        return frozenset(name for name, n in counts.items() if n > 1)

    @cached_property
    def _user_leaf(self) -> dict[tuple[str, str], int]:
        """(project, user) -> leaf, for users written as leaves under a project node."""
        return {
            (self.names[self.parent[i]], self.names[i]): i
            for i in self.leaves
            if self.parent[i] > ROOT
        }

    def leaves_for(self, projects: pd.Series, users: pd.Series) -> np.ndarray:
        """The leaf each job is charged to, or -1 (unallocated): the leaf named by its project,
        else the leaf named by its user under the node named by its project."""
        clash = projects[projects.isin(self._ambiguous)]
        if len(clash):
            name = clash.iloc[0]
            where = [
                "/".join(self.names[n] for n in self.path(i))
                for i in self.leaves
                if self.names[i] == name
            ]
            raise BudgetError(
                f"project '{name}' names more than one leaf of the budget tree ({', '.join(where)}), "
                f"so its jobs cannot be charged: rename all but one, or give the jobs the project of one"
            )
        leaf = projects.map(self.leaf_of)
        missing = leaf.isna().to_numpy() & (projects != "").to_numpy()
        if missing.any() and self._user_leaf:
            import pandas as pd  # here only: the tree (and the CLI that reads it) loads without pandas

            pairs = pd.Series(
                list(zip(projects[missing], users[missing])), index=projects.index[missing]
            )
            leaf[missing] = pairs.map(self._user_leaf)
        return leaf.fillna(-1).to_numpy(dtype=int)

    def path(self, node: int) -> tuple[int, ...]:
        """Nodes from the root down to ``node``."""
        out = [node]
        while self.parent[out[-1]] >= 0:
            out.append(self.parent[out[-1]])
        return tuple(reversed(out))

    @cached_property
    def fraction(self) -> np.ndarray:
        """Entitled fraction of the cluster per node (root = 1)."""
        frac = np.ones(self.size)
        kids = self.children
        for i in range(self.size):  # parents precede children in this layout
            total = sum(self.share[c] for c in kids[i])
            for c in kids[i]:
                frac[c] = frac[i] * self.share[c] / total
        return frac

    def subtree_sum(self, leaf_values: np.ndarray) -> np.ndarray:
        """Sum values given per node at the leaves up to every node; works on [..., nodes] arrays."""
        values = np.asarray(leaf_values, dtype=float)
        if values.ndim == 1:
            return np.array(self.subtree_sum_list(values.tolist()))
        out = values.copy()
        self._add_up(np.moveaxis(out, -1, 0))  # (a view: node-major, the additions land in out)
        return out

    def subtree_sum_list(self, values: list[float]) -> list[float]:
        """``subtree_sum`` of one vector of plain floats, in place (the hot case: every
        fair-share refresh)."""
        return self._add_up(values)

    def _add_up(self, values: ByNode) -> ByNode:
        """Add each node's value into its parent's, deepest first, in place: ``values[node]``
        is a float, or a row of a node-major array."""
        parent = self.parent
        for i in range(self.size - 1, 0, -1):  # children have larger indices than parents
            values[parent[i]] += values[i]
        return values

    # ----- fair share ------------------------------------------------------------------------
    def fair_tree_order(self, usage: np.ndarray | list[float]) -> list[int]:
        """Leaves ranked by Slurm's Fair Tree: at each level the least-served child first.

        ``usage`` is per node (subtree sums). Served = usage / share among siblings, so a
        higher level factor (share / usage) ranks first; ties go to the larger share, then
        to the order written.
        """
        used = usage.tolist() if isinstance(usage, np.ndarray) else usage
        order: list[int] = []
        stack = [ROOT]
        while stack:  # depth first
            i = stack.pop()
            keys = self._ranking_keys[i]
            if not keys:
                order.append(i)
                continue
            ranked = sorted([(used[c] / share, minus, c) for share, minus, c in keys], reverse=True)
            stack.extend(c for _, _, c in ranked)  # the best-ranked child is popped first
        return order

    @cached_property
    def _ranking_keys(self) -> list[list[tuple[float, float, int]]]:
        """Per node, its children as (share, -share, index): the static part of Fair Tree keys."""
        return [[(self.share[c], -self.share[c], c) for c in kids] for kids in self.children]

    # ----- owed ------------------------------------------------------------------------------
    def owed_rates(
        self, capacity: np.ndarray, leaf_demand: np.ndarray, out: np.ndarray | None = None
    ) -> np.ndarray:
        """GPUs owed per node at each instant: demand-capped weighted water-filling down the tree.

        ``capacity`` is [T], ``leaf_demand`` is [T, nodes] (zero except at leaves). What a child
        cannot use flows to its siblings; a node is never owed more than it asks for. Every
        instant is filled on its own, so the rows go in blocks: the water-filling's temporaries
        (about ten arrays of the block's shape) then stay small however long the run (at
        1,000,000 jobs they were most of the metrics' peak memory). ``out`` (a float array of
        the demand's shape; it may be ``leaf_demand`` itself) receives the rates.
        """
        owed = np.empty(np.shape(leaf_demand)) if out is None else out
        for lo in range(0, len(capacity), OWED_BLOCK_ROWS):
            rows = slice(lo, lo + OWED_BLOCK_ROWS)
            owed[rows] = self._owed_block(capacity[rows], leaf_demand[rows])
        return owed

    def _owed_block(self, capacity: np.ndarray, leaf_demand: np.ndarray) -> np.ndarray:
        # Node-major ([nodes, T]): a node's instants are contiguous, so the subtree sums add
        # whole rows and a node's children are a gather of rows (``subtree_sum``'s additions,
        # in its order; the water-filling gets the same [T, children] arrays).
        demand = self._add_up(np.array(leaf_demand.T, dtype=float, order="C"))
        owed = np.zeros_like(demand)
        owed[ROOT] = np.minimum(capacity, demand[ROOT])
        for i, kids in enumerate(self.children):
            if kids:
                weights = np.array([self.share[c] for c in kids])
                wanted = np.ascontiguousarray(demand[list(kids)].T)
                owed[list(kids)] = waterfill(owed[i], wanted, weights).T
        return owed.T


def _user_names(raw: Any, project: str, source: str) -> tuple[str, ...]:
    """User names listed under a project: plain names or ``{name: ...}`` mappings."""
    if isinstance(raw, str) or not isinstance(raw, Sequence):
        raise BudgetError(f"{source}: project '{project}': users must be a list of names")
    names = [str(u.get("name", "") if isinstance(u, Mapping) else u).strip() for u in raw]
    if "" in names:
        raise BudgetError(f"{source}: project '{project}': a user has no name")
    return tuple(names)


def waterfill(
    capacity: np.ndarray, demand: np.ndarray, weights: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Split ``capacity`` [T] among children [T, n] in proportion to ``weights``, capped at demand.

    Vectorised over T: for each row find the level L with sum(min(d_i, L * w_i)) = capacity.
    """
    w = np.asarray(weights, dtype=float)
    d = np.asarray(demand, dtype=float)
    cap = np.asarray(capacity, dtype=float)
    if d.shape[1] == 0:
        return d.copy()
    out = d.copy()  # rows whose demand fits get it all (most rows: sorting them is the cost)
    short = np.flatnonzero(~(d.sum(axis=1) <= cap))
    if len(short):
        out[short] = _share_levels(cap[short], d[short], w)
    return out


def _share_levels(cap: np.ndarray, d: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``waterfill``'s rows whose demand exceeds the capacity: min(d_i, L * w_i) at the level L
    where the shares use the capacity."""
    ratio = d / w
    order = np.argsort(ratio, axis=1, kind="stable")
    r_s = np.take_along_axis(ratio, order, axis=1)
    d_s = np.take_along_axis(d, order, axis=1)
    w_s = w[order]
    below = np.cumsum(d_s, axis=1) - d_s  # demand of children that saturate before k
    w_from = np.cumsum(w_s[:, ::-1], axis=1)[:, ::-1]  # weight of children k..n-1
    used_at = below + r_s * w_from  # capacity used if the level were ratio k
    k = np.argmax(used_at >= cap[:, None] - 1e-9, axis=1)
    rows = np.arange(len(cap))
    level = (cap - below[rows, k]) / w_from[rows, k]
    return np.minimum(d, level[:, None] * w)
