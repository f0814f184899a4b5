from hypothesis import given
from hypothesis import strategies as st

from rearank.methods.listwise.answer import STATUSES, apply_permutation, format_answer, parse_answer


def test_ok_answer():
    p = parse_answer("<think>because</think>\n<answer>[2] > [3] > [1]</answer>", 3)
    assert p.permutation == (1, 2, 0) and p.status == "ok" and p.has_tags and p.strict_format


def test_repairs_duplicates_out_of_range_and_missing():
    p = parse_answer("<think>t</think><answer>[3] > [3] > [7] > [1]</answer>", 4)
    assert p.permutation == (2, 0, 1, 3)
    assert (p.n_duplicates, p.n_out_of_range, p.n_missing) == (1, 1, 2)
    assert p.status == "out_of_range" and not p.strict_format


def test_repetition_and_missing_status():
    assert parse_answer("<answer>[1] > [1] > [2]</answer>", 2).status == "repetition"
    assert parse_answer("<answer>[2]</answer>", 3).status == "missing_ids"
    assert parse_answer("<answer>[2]</answer>", 3).permutation == (1, 0, 2)


def test_truncated_and_wrong_format():
    p = parse_answer("<think>long reasoning</think><answer>[2] > [1", 3)
    assert p.status == "truncated" and p.permutation == (1, 0, 2)
    assert parse_answer("<answer>[1] > [2]</answer>", 2, hit_token_limit=True).status == "truncated"
    p = parse_answer("I cannot rank these.", 3)
    assert p.status == "wrong_format" and p.permutation == (0, 1, 2)


def test_unclosed_think_is_truncated_and_ignores_ids_in_reasoning():
    p = parse_answer("<think>[3] looks best, then [2]", 3)
    assert p.status == "truncated" and p.permutation == (0, 1, 2) and p.n_ids == 0
    # a closed think followed by a later unclosed one is still cut off mid-reasoning
    assert parse_answer("<think>a</think> <think>[2] > [1]", 2).permutation == (0, 1)
    # an answer block wins even when the think was never closed
    assert parse_answer("<think>[1] <answer>[2] > [1]</answer>", 2).permutation == (1, 0)


def test_tags_must_be_in_order():
    assert parse_answer("<THINK>x</THINK><Answer>[1]</Answer>", 1).has_tags
    assert not parse_answer("<answer>[1]</answer><think>x</think>", 1).has_tags
    assert not parse_answer("<think>x<answer>[1]</answer>", 1).has_tags


def test_fallbacks_after_think_and_whole_text():
    # ids inside the reasoning ([1] discussed) must not leak into the answer after </think>
    p = parse_answer("<think>[1] is off-topic, [3] is good</think> [3] > [2] > [1]", 3)
    assert p.permutation == (2, 1, 0) and p.status == "ok" and not p.has_tags
    assert parse_answer("[2] > [1]", 2).permutation == (1, 0)
    assert parse_answer("<answer>2 > 1 > 3</answer>", 3).permutation == (1, 0, 2)


def test_last_answer_block_wins():
    p = parse_answer("<think>x</think><answer>[1] > [2]</answer> wait <answer>[2] > [1]</answer>", 2)
    assert p.permutation == (1, 0)


def test_format_and_apply_roundtrip():
    assert format_answer((2, 0, 1)) == "[3] > [1] > [2]"
    assert parse_answer(f"<answer>{format_answer((2, 0, 1))}</answer>", 3).permutation == (2, 0, 1)
    assert apply_permutation("abc", (2, 0, 1)) == ["c", "a", "b"]


@given(st.text(), st.integers(0, 40), st.booleans())
def test_never_raises_and_always_permutation(text, n, limit):
    p = parse_answer(text, n, hit_token_limit=limit)
    assert sorted(p.permutation) == list(range(n))
    assert p.status in STATUSES


@given(st.lists(st.integers(-5, 60), max_size=50), st.integers(1, 40))
def test_random_id_lists_repair_to_permutations(ids, n):
    text = "<think>x</think><answer>" + " > ".join(f"[{i}]" for i in ids) + "</answer>"
    p = parse_answer(text, n)
    assert sorted(p.permutation) == list(range(n))
    first = []
    for i in ids:
        if 1 <= i <= n and i - 1 not in first:
            first.append(i - 1)
    assert list(p.permutation[: len(first)]) == first


def test_non_string_input():
    assert parse_answer(None, 2).permutation == (0, 1)
