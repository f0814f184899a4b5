"""Synthesis sampling's edges: duplicates counted one by one, the shuffle's own stream, the validation split's
bounds, the refusals word for word."""

from __future__ import annotations

import pytest

from data_synthesis.sampling import draw_sets, query_rng, split_queries, stable_seed


def test_every_rejected_draw_is_counted_and_the_shuffle_has_its_own_stream():
    # replay both streams with the documented seeds: "sets" draws sorted positions, "order" permutes each kept set
    drawn = draw_sets("q", 4, 2, 6, seed=5, order="shuffle")
    sets_rng, order_rng = query_rng(5, "q", "sets"), query_rng(5, "q", "order")
    kept, duplicates = [], 0
    while len(kept) < 6:  # C(4, 2) = 6 sets, all of them found
        positions = tuple(sorted(sets_rng.choice(4, size=2, replace=False).tolist()))
        if positions in kept:
            duplicates += 1
        else:
            kept.append(positions)
    assert duplicates >= 2  # a seed that rejects more than one draw
    shuffled = tuple(tuple(s[i] for i in order_rng.permutation(2).tolist()) for s in kept)
    assert (drawn.sets, drawn.duplicates, drawn.possible) == (shuffled, duplicates, 6)


def test_a_set_size_out_of_range_is_refused_by_name():
    with pytest.raises(ValueError) as err:
        draw_sets("q", 3, 4, 1, seed=0)
    assert str(err.value) == "set_size 4 must be between 1 and the number of candidates (3)"


@pytest.mark.parametrize("fraction", [1.0, 1.5, -0.1])
def test_a_validation_fraction_outside_0_to_1_is_refused(fraction):
    with pytest.raises(ValueError) as err:
        split_queries(["a", "b"], fraction, seed=0)
    assert str(err.value) == f"val_fraction must be in [0, 1), got {fraction}"


def test_one_query_always_stays_in_training():
    # round(0.9 * 2) = 2 validation queries asked; one of the two stays in training
    assert len(split_queries(["a", "b"], 0.9, seed=0)) == 1
    assert len(split_queries(["a", "b", "c", "d"], 0.99, seed=0)) == 3


def test_sets_of_one_and_an_unknown_order():
    drawn = draw_sets("q", 3, 1, 5, seed=0)
    assert sorted(drawn.sets) == [(0,), (1,), (2,)] and drawn.possible == 3
    with pytest.raises(ValueError) as err:
        draw_sets("q", 3, 1, 1, seed=0, order="random")
    assert str(err.value) == "order must be one of ('bm25', 'shuffle'), got 'random'"


def test_the_split_takes_the_queries_first_by_their_split_hash():
    qids = [f"q{i}" for i in range(10)]
    ranked = sorted(qids, key=lambda qid: stable_seed(9, qid, "split"))
    assert split_queries(qids, 0.3, seed=9) == set(ranked[:3])
