"""Budget trees: fractions, Fair Tree ranking, owed water-filling, YAML (docs/model.md section 4)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import examples, small_tree
from hypothesis import given, settings
from hypothesis import strategies as st

from impactlab.inputs import budgets
from impactlab.inputs.budgets import BudgetError, BudgetTree, waterfill

# Node ids of TREE_SPEC, in the order written (depth first).
ROOT, PROG_A, PA1, PA2, PROG_B, PB1, PC = range(7)


def leaf_vector(tree: BudgetTree, **values: float) -> np.ndarray:
    """A per-node vector with ``values`` at the named leaves."""
    out = np.zeros(tree.size)
    for name, v in values.items():
        out[tree.leaf_of[name]] = v
    return out


# ----- structure and fractions -----------------------------------------------------------------
def test_tree_layout_follows_the_order_written(tree):
    assert tree.names == ("root", "progA", "pa1", "pa2", "progB", "pb1", "pc")
    assert tree.parent == (-1, ROOT, PROG_A, PROG_A, ROOT, PROG_B, ROOT)
    assert tree.leaves == (PA1, PA2, PB1, PC)
    assert tree.leaf_of == {"pa1": PA1, "pa2": PA2, "pb1": PB1, "pc": PC}
    assert tree.path(PA2) == (ROOT, PROG_A, PA2)


def test_fractions_are_products_of_sibling_normalised_shares(tree):
    # root level: progA 3, progB 1, pc 2 of 6; progA: pa1 1, pa2 2 of 3
    expected = [1.0, 3 / 6, 3 / 6 * 1 / 3, 3 / 6 * 2 / 3, 1 / 6, 1 / 6 * 1, 2 / 6]
    np.testing.assert_allclose(tree.fraction, expected)
    assert tree.fraction[list(tree.leaves)].sum() == pytest.approx(1.0)


def test_shares_only_matter_relative_to_siblings():
    a = BudgetTree.flat({"x": 1, "y": 3})
    b = BudgetTree.flat({"x": 25, "y": 75})
    np.testing.assert_allclose(a.fraction, [1.0, 0.25, 0.75])
    np.testing.assert_allclose(b.fraction, a.fraction)


def test_subtree_sum_adds_leaves_up_to_the_root(tree):
    usage = tree.subtree_sum(leaf_vector(tree, pa1=1, pa2=2, pb1=4, pc=8))
    np.testing.assert_allclose(usage, [15, 3, 1, 2, 4, 4, 8])


# ----- Fair Tree -------------------------------------------------------------------------------
def test_fair_tree_ranks_the_least_served_subtree_first(tree):
    usage = tree.subtree_sum(leaf_vector(tree, pa1=10, pa2=0, pb1=5, pc=30))
    # root: progA 10/3, progB 5/1, pc 30/2 -> progA, progB, pc; in progA: pa2 0/2, pa1 10/1
    assert tree.fair_tree_order(usage) == [PA2, PA1, PB1, PC]


def test_fair_tree_ranks_depth_first(tree):
    usage = tree.subtree_sum(leaf_vector(tree, pa1=0, pa2=60, pb1=5, pc=1))
    # root: progA 60/3 = 20, progB 5, pc 0.5 -> pc, progB, progA; in progA: pa1 0, pa2 30
    assert tree.fair_tree_order(usage) == [PC, PB1, PA1, PA2]


def test_fair_tree_ties_go_to_the_larger_share_then_the_order_written(tree):
    assert tree.fair_tree_order(np.zeros(tree.size)) == [PA2, PA1, PC, PB1]
    flat = BudgetTree.flat({"x": 1, "y": 1, "z": 1})
    assert flat.fair_tree_order(np.zeros(flat.size)) == [1, 2, 3]
    # served equally (usage proportional to share): larger share first
    flat = BudgetTree.flat({"x": 1, "y": 2})
    assert flat.fair_tree_order(np.array([3.0, 1.0, 2.0])) == [2, 1]


# ----- water-filling ---------------------------------------------------------------------------
def fill(capacity: float, demand: list[float], weights: list[float]) -> np.ndarray:
    """Water-fill one instant."""
    return waterfill(np.array([capacity]), np.array([demand], dtype=float), weights)[0]


@pytest.mark.parametrize(
    "capacity, demand, weights, expected",
    [
        (12, [100, 100, 100], [1, 2, 3], [2, 4, 6]),  # everyone wants more: split by weight
        (10, [2, 10, 10], [1, 1, 1], [2, 4, 4]),  # an unused share flows to the siblings
        (12, [10, 10, 1], [1, 2, 1], [11 / 3, 22 / 3, 1]),  # level 11/3: 11/3 + 22/3 + 1 = 12
        (10, [1, 3, 100], [1, 1, 1], [1, 3, 6]),  # two children saturate in turn
        (10, [1, 2, 3], [1, 1, 1], [1, 2, 3]),  # total demand below capacity: all of it
        (6, [2, 2, 2], [1, 1, 1], [2, 2, 2]),  # exactly enough
        (8, [0, 8, 8], [2, 1, 1], [0, 4, 4]),  # a child asking nothing gets nothing
        (0, [5, 5], [1, 1], [0, 0]),  # no capacity
        (8, [6, 2], [1, 3], [6, 2]),  # the heavy child asks little, the light one gets the rest
    ],
)
def test_waterfill_hand_cases(capacity, demand, weights, expected):
    np.testing.assert_allclose(fill(capacity, demand, weights), expected, atol=1e-9)


def test_waterfill_is_vectorised_over_instants():
    cap = np.array([12.0, 10.0, 10.0, 0.0])
    demand = np.array([[100, 100, 100], [2, 10, 10], [1, 2, 3], [5, 5, 5]], dtype=float)
    out = waterfill(cap, demand, [1, 1, 1])
    np.testing.assert_allclose(out, [[4, 4, 4], [2, 4, 4], [1, 2, 3], [0, 0, 0]], atol=1e-9)


def test_waterfill_of_no_children_is_empty():
    assert waterfill(np.array([5.0, 3.0]), np.zeros((2, 0)), []).shape == (2, 0)


@settings(max_examples=examples(200), deadline=None)
@given(data=st.data())
def test_waterfill_is_a_demand_capped_weighted_level(data):
    n = data.draw(st.integers(1, 6))
    weights = data.draw(st.lists(st.floats(0.1, 10), min_size=n, max_size=n))
    demand = data.draw(st.lists(st.one_of(st.just(0.0), st.floats(0, 100)), min_size=n, max_size=n))
    capacity = data.draw(st.floats(0, 200))
    out = fill(capacity, demand, weights)
    d, w = np.array(demand), np.array(weights)
    eps = 1e-6 * max(1.0, capacity)
    assert (out >= -eps).all() and (out <= d + eps).all(), "never more than asked"
    assert out.sum() == pytest.approx(min(capacity, d.sum()), abs=eps), (
        "capacity is used while someone asks"
    )
    # one water level L: each child gets min(demand, L * weight)
    short = out < d - eps
    if short.any():
        level = out[short] / w[short]
        assert np.ptp(level) <= 1e-6 * max(1.0, level.max())
        assert (d[~short] <= level.max() * w[~short] + eps).all()


def test_owed_flows_an_unused_share_to_the_sibling():
    tree = BudgetTree.flat({"a": 1, "b": 3})
    owed = tree.owed_rates(np.array([8.0]), np.array([[0.0, 8.0, 2.0]]))
    # b's fair share is 6 but it asks for 2; a takes the rest
    np.testing.assert_allclose(owed[0], [8, 6, 2])


def test_owed_is_water_filled_level_by_level(tree):
    demand = leaf_vector(tree, pa1=10, pa2=0, pb1=10, pc=1)
    owed = tree.owed_rates(np.array([12.0]), demand[None, :])[0]
    # root 12 among progA (3, wants 10), progB (1, wants 10), pc (2, wants 1):
    # pc saturates, then 3L + L = 11 -> L = 2.75: progA 8.25, progB 2.75.
    # In progA, pa2 wants nothing, so pa1 gets all 8.25.
    np.testing.assert_allclose(owed, [12, 8.25, 8.25, 0, 2.75, 2.75, 1])


def test_owed_is_the_demand_when_demand_is_below_capacity(tree):
    demand = leaf_vector(tree, pa1=1, pa2=2, pb1=3, pc=4)
    owed = tree.owed_rates(np.array([100.0]), demand[None, :])[0]
    np.testing.assert_allclose(owed, tree.subtree_sum(demand))


def test_owed_rates_per_instant(tree):
    demand = np.stack([leaf_vector(tree, pa1=12, pa2=12, pb1=12, pc=12), leaf_vector(tree)])
    owed = tree.owed_rates(np.array([12.0, 12.0]), demand)
    # all ask for more than the cluster: owed = fraction x capacity; then nobody asks anything
    np.testing.assert_allclose(owed[0], 12 * tree.fraction)
    np.testing.assert_allclose(owed[1], np.zeros(tree.size))


@settings(max_examples=examples(40), deadline=None)
@given(st.integers(0, 40), st.integers(1, 7), st.data())
def test_owed_rates_in_blocks_are_those_of_one_block(rows, block, data):
    """Instants are water-filled in blocks of rows to bound memory: any block size gives the
    same owed rates, bit for bit, as all rows at once."""
    tree = small_tree()
    amounts = st.floats(0, 50, allow_nan=False)
    demand = np.zeros((rows, tree.size))
    for leaf in tree.leaves:
        demand[:, leaf] = data.draw(st.lists(amounts, min_size=rows, max_size=rows))
    capacity = np.array(
        data.draw(st.lists(st.floats(0, 60, allow_nan=False), min_size=rows, max_size=rows))
    )
    whole = tree.owed_rates(capacity, demand)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(budgets, "OWED_BLOCK_ROWS", block)
        np.testing.assert_array_equal(tree.owed_rates(capacity, demand), whole)
        over = demand.copy()  # the rates may be written over the demand they are filled from
        assert tree.owed_rates(capacity, over, out=over) is over
        np.testing.assert_array_equal(over, whole)
    assert whole.shape == demand.shape


# ----- YAML and bad trees ----------------------------------------------------------------------
def test_yaml_round_trip(tree, tmp_path):
    path = tmp_path / "budgets.yaml"
    path.write_text(yaml.safe_dump(tree.to_dict()))
    again = BudgetTree.from_yaml(path)
    assert again == tree
    np.testing.assert_allclose(again.fraction, tree.fraction)


def test_yaml_written_by_hand(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text(
        "name: lab\nchildren:\n  - name: nlp\n    share: 2\n    children:\n"
        "      - {name: llm, share: 3}\n      - {name: eval, share: 1}\n"
        "  - name: robots\n    share: 2\n"
    )
    tree = BudgetTree.from_yaml(path)
    assert tree.names == ("lab", "nlp", "llm", "eval", "robots")
    np.testing.assert_allclose(tree.fraction, [1, 0.5, 0.375, 0.125, 0.5])
    assert tree.to_dict() == {
        "name": "lab",
        "share": 1.0,
        "children": [
            {
                "name": "nlp",
                "share": 2.0,
                "children": [{"name": "llm", "share": 3.0}, {"name": "eval", "share": 1.0}],
            },
            {"name": "robots", "share": 2.0},
        ],
    }


def test_a_missing_share_counts_as_one():
    tree = BudgetTree.from_dict(
        {"name": "r", "children": [{"name": "a"}, {"name": "b", "share": 3}]}
    )
    np.testing.assert_allclose(tree.fraction, [1, 0.25, 0.75])


@pytest.mark.parametrize(
    "child, words",
    [
        ({"share": 1}, "no name"),
        ({"name": "  ", "share": 1}, "no name"),
        ({"name": "a", "share": "lots"}, "'a'"),
        ({"name": "a", "share": 0}, "positive"),
        ({"name": "a", "share": -2}, "positive"),
        ({"name": "a", "share": float("inf")}, "positive"),
        ({"name": "a", "share": float("nan")}, "positive"),
        ({"name": "a", "share": None}, "'a'"),
    ],
)
def test_bad_nodes_raise_budget_error_naming_the_node(child, words):
    with pytest.raises(BudgetError, match=words):
        BudgetTree.from_dict({"name": "root", "children": [{"name": "ok"}, child]}, source="b.yaml")


@pytest.mark.parametrize(
    "tiny, huge, node",
    [(1e-300, 1e300, "'a'"), (1.0, 1e13, "'a'"), (1e308, 1e308, "'a'")],
    ids=["underflow", "a-trillionth", "sum-overflows"],
)
def test_shares_too_far_apart_to_rank_are_refused_naming_the_node(tiny, huge, node):
    """Fair share divides by each node's entitled fraction: one that rounds to 0 (or to a
    meaningless trillionth) is a BudgetError at load, not a ZeroDivisionError mid-run."""
    spec = {
        "name": "root",
        "children": [{"name": "a", "share": tiny}, {"name": "b", "share": huge}],
    }
    with pytest.raises(BudgetError, match=f"b.yaml: node {node}: .* bring the shares closer"):
        BudgetTree.from_dict(spec, source="b.yaml")
    near = BudgetTree.from_dict(
        {**spec, "children": [{"name": "a", "share": 1}, {"name": "b", "share": 1e11}]}
    )
    assert near.fraction[1] == pytest.approx(1e-11)


def test_a_project_twice_raises_budget_error():
    spec = {
        "name": "root",
        "children": [
            {"name": "g1", "children": [{"name": "p"}]},
            {"name": "g2", "children": [{"name": "p"}]},
        ],
    }
    tree = BudgetTree.from_dict(spec)  # a name may repeat (users under two projects) ...
    # ... but a job cannot name it
    with pytest.raises(
        BudgetError, match=r"'p' names more than one leaf .* \(root/g1/p, root/g2/p\)"
    ):
        tree.leaves_for(pd.Series(["p"]), pd.Series(["someone"]))


@pytest.mark.parametrize("text", ["- a\n- b\n", "name: [unclosed\n", "just a string\n"])
def test_unusable_yaml_raises_budget_error_naming_the_file(tmp_path, text):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(BudgetError, match=r"bad\.yaml"):
        BudgetTree.from_yaml(path)


def test_a_missing_yaml_file_raises_budget_error(tmp_path):
    with pytest.raises(BudgetError, match=r"nope\.yaml"):
        BudgetTree.from_yaml(tmp_path / "nope.yaml")
