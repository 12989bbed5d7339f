"""The index of unprotected funded jobs that impactful's victim search walks (policies/
open_victims.py): who is in it when, and the order it hands them out in."""

from __future__ import annotations

from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from impactlab.policies.open_victims import OpenVictims

NODES = (1, 4)  # a leaf (4) under a program (1)
ONE = (1, False)  # one GPU, not only on the reserve


LATER = 1e6  # a time after every start below: every unprotected job has joined by then


def order(index: OpenVictims, streams) -> list[int]:
    return [v for _, v, _ in index.newest_first(streams)]


def opened(index: OpenVictims, jobs: int = 20) -> OpenVictims:
    """``index`` once time has moved past every start (no job shielded)."""
    index.refresh(LATER, [False] * jobs)
    return index


def test_a_protected_job_joins_when_its_protection_has_ended():
    index = OpenVictims()
    index.add(7, NODES, ONE, start_s=0.0, until_s=100.0, end_s=1000.0)
    shielded = [False] * 10
    shielded[7] = True
    index.refresh(50.0, shielded)
    assert len(index) == 0
    index.refresh(100.0, shielded)  # due, but its protection event has not fired yet
    assert len(index) == 0
    shielded[7] = False
    index.refresh(100.0, shielded)
    assert order(index, [(4, ONE)]) == [7] and order(index, [(1, ONE)]) == [7]


def test_an_unprotected_job_joins_once_time_has_moved_past_its_start():
    # A job is never a victim at the instant it starts (nor before it begins, when it waits
    # for GPUs in a grace period): the index holds only jobs a search may draw now.
    index = OpenVictims()
    index.add(1, NODES, ONE, start_s=100.0, until_s=100.0, end_s=1000.0)
    index.add(2, NODES, ONE, start_s=130.0, until_s=130.0, end_s=1000.0)  # begins later
    shielded = [False] * 3
    for now in (50.0, 100.0):
        index.refresh(now, shielded)
        assert len(index) == 0 and index.smallest(4, 8, True) is None and index.gpus.get(4, 0) == 0
    index.refresh(100.5, shielded)
    assert order(index, [(4, ONE)]) == [1] and index.gpus[1] == 1
    index.refresh(130.5, shielded)
    assert order(index, [(4, ONE)]) == [2, 1] and index.gpus[4] == 2


def test_a_job_protected_to_its_end_never_joins_and_an_unprotected_one_joins_after_its_start():
    index = OpenVictims()
    index.add(1, NODES, ONE, start_s=0.0, until_s=500.0, end_s=400.0)
    index.add(2, NODES, ONE, start_s=0.0, until_s=0.0, end_s=400.0)
    index.refresh(1e9, [False] * 3)
    assert order(index, [(4, ONE)]) == [2]


def test_an_attempt_that_ended_while_protected_never_joins():
    index = OpenVictims()
    index.add(3, NODES, ONE, start_s=0.0, until_s=100.0, end_s=1000.0)
    index.add(4, NODES, ONE, start_s=0.0, until_s=100.0, end_s=1000.0)
    index.remove(3)  # it failed while protected: no longer shielded, but no longer running
    index.refresh(150.0, [False] * 5)
    assert order(index, [(4, ONE)]) == [4]
    index.add(3, NODES, ONE, start_s=160.0, until_s=300.0, end_s=1000.0)  # restarted, protected
    shielded = [False, False, False, True, False]
    index.refresh(200.0, shielded)
    assert order(index, [(4, ONE)]) == [4]
    shielded[3] = False
    index.refresh(300.0, shielded)
    assert order(index, [(4, ONE)]) == [3, 4]


def test_newest_first_with_ties_broken_by_the_higher_job_and_removal():
    index = OpenVictims()
    for j, start in [(5, 10.0), (2, 30.0), (9, 30.0), (4, 20.0)]:
        index.add(j, NODES, ONE, start, start, 1e9)
    opened(index)
    assert order(index, [(4, ONE)]) == [9, 2, 4, 5]
    index.remove(2)
    assert order(index, [(4, ONE)]) == [9, 4, 5]
    assert index.eligible(4, 1, True) == [ONE]
    index.remove(9), index.remove(4), index.remove(5)
    assert index.eligible(4, 1, True) == [] and index.eligible(1, 8, True) == []


def test_merged_streams_tag_each_job_with_its_own_budget_node():
    # Sides with equal fair-share values are walked as one merged group; each victim must be
    # judged as its own side's (a lazily bound tag once named the last side for all of them).
    index = OpenVictims()
    index.add(1, (1, 3), ONE, start_s=10.0, until_s=0.0, end_s=1000.0)
    index.add(2, (1, 4), ONE, start_s=20.0, until_s=0.0, end_s=1000.0)
    index.add(3, (1, 3), ONE, start_s=30.0, until_s=0.0, end_s=1000.0)
    opened(index)
    merged = list(index.newest_first([(3, ONE), (4, ONE)]))
    assert merged == [(30.0, 3, 3), (20.0, 2, 4), (10.0, 1, 3)]


def test_eligible_sizes_stop_at_the_largest_and_leave_out_the_reserve_if_asked():
    index = OpenVictims()
    index.add(1, NODES, (1, False), 0.0, 0.0, 1e9)
    index.add(2, NODES, (1, True), 0.0, 0.0, 1e9)
    index.add(3, NODES, (8, False), 0.0, 0.0, 1e9)
    index.add(4, NODES, (16, False), 0.0, 0.0, 1e9)
    opened(index)
    assert index.eligible(4, 8, True) == [(1, False), (1, True), (8, False)]
    assert index.eligible(4, 8.0, False) == [(1, False), (8, False)]
    assert index.eligible(4, 0.5, True) == []


@settings(max_examples=examples(80), deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([1, 2, 8]), st.sampled_from([4, 5])),
        min_size=1,
        max_size=30,
    ),
    st.data(),
)
def test_merged_streams_follow_start_then_job_descending(jobs, data):
    """Whatever the sizes and leaves, merging lists gives (start, job) descending, as sorting
    every open job would; removing jobs keeps it so."""
    index = OpenVictims()
    info = {}
    for j, (start, held, leaf) in enumerate(jobs):
        index.add(j, (1, leaf), (held, False), float(start), float(start), 1e9)
        info[j] = (float(start), leaf)
    opened(index, len(jobs))
    gone = data.draw(st.sets(st.sampled_from(sorted(info))))
    for j in gone:
        index.remove(j)
    streams = [(1, size) for size in index.eligible(1, 8, True)]
    got = order(index, streams) if streams else []
    want = sorted((j for j in info if j not in gone), key=lambda j: (info[j][0], j), reverse=True)
    assert got == want
    for leaf in (4, 5):
        streams = [(leaf, size) for size in index.eligible(leaf, 8, True)]
        want_leaf = [j for j in want if info[j][1] == leaf]
        assert (order(index, streams) if streams else []) == want_leaf


@settings(max_examples=examples(80), deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([1, 2, 8, 16]), st.booleans(), st.integers(0, 1)), max_size=12
    ),
    st.sampled_from([0.5, 1, 2, 4.0, 8, 16, 64]),
    st.booleans(),
)
def test_smallest_is_the_first_size_eligible_gives(jobs, largest, reserve_too):
    """The shortcut the fast failed search takes agrees with the list the walk uses, as jobs
    come and go."""
    index = OpenVictims()
    for j, (held, on_reserve, _) in enumerate(jobs):
        index.add(j, NODES, (held, on_reserve), 0.0, 0.0, 1e9)
    opened(index, len(jobs))
    for j, (_, _, leave) in enumerate(jobs):
        if leave:
            index.remove(j)
    for node in (*NODES, 9):
        sizes = index.eligible(node, largest, reserve_too)
        assert index.smallest(node, largest, reserve_too) == (sizes[0][0] if sizes else None)


@settings(max_examples=examples(80), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([1, 2, 8, 16]),
            st.sampled_from([4, 5]),
            st.sampled_from([0.0, 50.0]),
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_gpus_under_each_budget_node_sum_the_open_jobs_there(jobs):
    """``gpus`` (the relief bound of impactful's whole-node shortcut) is the sum of what the
    open jobs under each budget node hold, as jobs start, open when their protection ends, and
    stop."""
    index = OpenVictims()
    for j, (held, leaf, protected_s, _) in enumerate(jobs):
        index.add(j, (1, leaf), (held, False), 0.0, protected_s, 1e9)
    index.refresh(10.0, [False] * len(jobs))  # only the unprotected are open yet
    for j, (_, _, _, leave) in enumerate(jobs):
        if leave:
            index.remove(j)
    for now in (10.0, 100.0):
        index.refresh(now, [False] * len(jobs))
        for node in (1, 4, 5):
            want = sum(
                held
                for j, (held, leaf, protected_s, leave) in enumerate(jobs)
                if not leave and protected_s <= now and node in (1, leaf)
            )
            assert index.gpus.get(node, 0) == want
