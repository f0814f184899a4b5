"""``rearank synth --method reasonrank`` pieces: the teacher lists, the self-consistency filter and its statistics,
the rows with and without reasoning, and the importer of ReasonRank's released data."""

from __future__ import annotations

import json

import pytest

from data_synthesis.reasonrank import ReasonRankConfig, build_rows, read_released, teacher_listings
from rearank.backends.base import STOP, Generation
from rearank.errors import FormatError
from rearank.methods.listwise.reasonrank import compute_score, parse_truth
from rearank.types import Candidate, Query, Request

QRELS = {"q1": {"d0": 2, "d1": 1}, "q2": {"d3": 1}, "q3": {"d0": 1}}


class Scripted:
    """A teacher answering each prompt from a queue of texts."""

    def __init__(self, answers):
        self.answers = list(answers)

    def generate(self, prompts, settings):
        return [Generation(text=self.answers.pop(0), prompt_tokens=1, completion_tokens=1, finish_reason=STOP,
                           latency_s=0.0) for _ in prompts]


def lists():
    cands = tuple(Candidate(f"d{i}", 4.0 - i, f"passage {i}") for i in range(4))
    return [(Request(Query(qid, f"query {qid}"), list(cands)), 0, cands) for qid in ("q1", "q2", "q3")]


ANSWERS = [
    "<think>d0 answers it best.</think>\n<answer>[1] > [2] > [3] > [4]</answer>",  # q1: ideal, nDCG 1
    "<think>Backwards.</think>\n<answer>[1] > [2] > [3] > [4]</answer>",           # q2: d3 last, nDCG 0.43
    "<think>Unsure.</think>\n<answer>[2] > [3]</answer>",                           # q3: not a full permutation
]


def test_the_filter_keeps_lists_whose_teacher_ndcg_reaches_alpha_and_counts_the_rest():
    listings = teacher_listings(lists(), QRELS, Scripted(ANSWERS), ReasonRankConfig())
    assert [x.status for x in listings] == ["ok", "ok", "missing_ids"]
    assert listings[0].teacher_ndcg() == 1.0 and listings[1].teacher_ndcg() == pytest.approx(0.430677, abs=1e-6)
    rows, sft, stats = build_rows(listings, ReasonRankConfig(val_fraction=0.0), "reasonrank/test")
    assert stats["filter"] == {"alpha": 0.4, "kept": 2, "dropped_unparsed": 1, "dropped_below_alpha": 0,
                               "dropped_no_relevant": 0}
    strict = build_rows(listings, ReasonRankConfig(val_fraction=0.0, alpha=0.5), "reasonrank/test")[2]
    assert strict["filter"]["kept"] == 1 and strict["filter"]["dropped_below_alpha"] == 1
    assert stats["teacher_ndcg10"]["histogram"]["0.4-0.5"] == 1 and stats["teacher_ndcg10"]["histogram"]["0.9-1.0"] == 1
    assert [r["extra_info"]["qid"] for r in rows["train"]] == ["q1", "q2"] and not rows["val"]
    truth = parse_truth(rows["train"][0]["reward_model"]["ground_truth"])
    assert truth.ids == ("d0", "d1", "d2", "d3") and truth.gold == truth.ids and truth.relevant == {"d0": 2, "d1": 1}
    target = sft["train"][0]["completion"][0]["content"]
    assert target == "<think>\nd0 answers it best.\n</think>\n<answer>[1] > [2] > [3] > [4]</answer>"
    # the SFT target is the gold list, so the reward scores it as the best answer
    score = compute_score("reasonrank/test", target, rows["train"][0]["reward_model"]["ground_truth"])["score"]
    assert score == pytest.approx(1.3)


def test_answer_only_rows_use_the_answer_only_template_and_target():
    listings = teacher_listings(lists(), QRELS, Scripted(ANSWERS), ReasonRankConfig())
    rows, sft, _ = build_rows(listings, ReasonRankConfig(val_fraction=0.0, reasoning=False), "reasonrank/test")
    assert sft["train"][0]["completion"][0]["content"] == "<answer>[1] > [2] > [3] > [4]</answer>"
    post = rows["train"][0]["prompt"][-1]["content"]
    assert "<think>" not in post and "Answer at once" in post


def write_released(tmp_path, records):
    path = tmp_path / "training_data_all.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_released_data_is_imported_and_filtered_alike(tmp_path):
    records = [
        {"dataset": "math-qa", "qid": "m1", "initial_list": ["a", "b", "c"], "final_list": ["b", "a", "c"],
         "reasoning": "b solves it.", "relevant_docids": ["b"]},
        {"dataset": "math-qa", "qid": "m2", "initial_list": list("abcdef"), "final_list": list("abcdef"),
         "reasoning": "unsure", "relevant_docids": ["f"]},  # its own relevant passage last: nDCG@10 1/log2(7)
    ]
    docs = {d: ("", f"text {d}") for d in "abcdef"}
    listings = read_released(write_released(tmp_path, records), {"m1": "q one", "m2": "q two"}, docs)
    assert [x.order for x in listings] == [("b", "a", "c"), tuple("abcdef")]
    rows, sft, stats = build_rows(listings, ReasonRankConfig(val_fraction=0.0), "reasonrank/released")
    assert stats["filter"]["kept"] == 1 and stats["filter"]["dropped_below_alpha"] == 1
    assert sft["train"][0]["completion"][0]["content"] == "<think>\nb solves it.\n</think>\n<answer>[2] > [1] > [3]</answer>"
    assert parse_truth(rows["train"][0]["reward_model"]["ground_truth"]).relevant == {"b": 1.0}


@pytest.mark.parametrize("record, message", [
    ({"qid": "m1", "initial_list": ["a", "b"], "final_list": ["a", "x"]}, ":1: final_list is not a permutation"),
    ({"qid": "m9", "initial_list": ["a"], "final_list": ["a"]}, ":1: query m9 has no text"),
    ({"qid": "m1", "initial_list": ["a", "z"], "final_list": ["z", "a"]}, ":1: passage z has no text"),
    ({"qid": "m1"}, ":1: not a ReasonRank record"),
])
def test_a_bad_released_record_is_a_one_line_error_naming_its_line(tmp_path, record, message):
    with pytest.raises(FormatError, match=message):
        read_released(write_released(tmp_path, [record]), {"m1": "q"}, {"a": ("", "t"), "b": ("", "t")})
