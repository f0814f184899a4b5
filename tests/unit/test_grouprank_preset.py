"""``--preset grouprank-released``: raw fusion, every repeat shuffled, the released one-message layout."""

import pytest

from rearank.backends.base import BackendBase, Generation
from rearank.cli import build_parser
from rearank.errors import RearankError
from rearank.flags import apply_defaults
from rearank.methods.groupwise import load_group_template
from rearank.methods.groupwise.parser import format_scores
from rearank.prompts import build_messages
from rearank.types import Candidate, Query, Request
from tests.engines import groupwise


class Table(BackendBase):
    name = "table"

    def __init__(self, table):
        self.table, self.prompts = table, []

    def generate(self, prompts, settings):
        self.prompts.extend(prompts)
        return [Generation("<reason>r</reason><answer>" + format_scores([self.table[d] for d in p.docids])
                           + "</answer>", 10, 5) for p in prompts]


def request(scores):
    return Request(Query("q", "fleas"), [Candidate(f"d{i}", s, text=f"text {i}") for i, s in enumerate(scores)])


def test_raw_fusion_adds_unnormalised_scores():
    # retriever scores 12, 11, 10; LLM scores 0, 10, 5.
    # raw:    0.6*0/10 + 0.4*12 = 4.8;  0.6*10/10 + 0.4*11 = 5.0;  0.6*5/10 + 0.4*10 = 4.3  -> d1, d0, d2
    # minmax: rerank (0, 1, 0.5), retriever (1, 0.5, 0): 0.4; 0.8; 0.3                       -> d1, d0, d2 too,
    # so also check a case where they differ: retriever 30, 11, 10 -> raw 12.0, 5.0, 4.3 -> d0, d1, d2
    # while minmax gives 0.6*0 + 0.4*1 = 0.4, 0.6*1 + 0.4*(1/20) = 0.62, 0.6*0.5 + 0 = 0.3 -> d1, d0, d2
    table = {"d0": 0, "d1": 10, "d2": 5}
    raw = groupwise(Table(table), group_size=3, fusion_weight=0.6, fusion="raw")
    assert [c.docid for c in raw.rerank([request([12, 11, 10])], progress=False)[0].candidates] == ["d1", "d0", "d2"]
    assert [c.docid for c in raw.rerank([request([30, 11, 10])], progress=False)[0].candidates] == ["d0", "d1", "d2"]
    minmax = groupwise(Table(table), group_size=3, fusion_weight=0.6)
    assert [c.docid for c in minmax.rerank([request([30, 11, 10])], progress=False)[0].candidates] == ["d1", "d0", "d2"]


def test_shuffle_all_reshuffles_the_first_repeat_too():
    table = {f"d{i}": 5 for i in range(8)}
    kept, shuffled = Table(table), Table(table)
    groupwise(kept, group_size=8, seed=3).rerank([request(range(8, 0, -1))], progress=False)
    groupwise(shuffled, group_size=8, seed=3, shuffle_all=True).rerank([request(range(8, 0, -1))], progress=False)
    assert kept.prompts[0].docids == tuple(f"d{i}" for i in range(8))
    assert sorted(shuffled.prompts[0].docids) == sorted(kept.prompts[0].docids)
    assert shuffled.prompts[0].docids != kept.prompts[0].docids  # seed 3 gives a different order of 8 (8! orders)


def test_released_template_is_one_user_message_with_character_cut():
    tpl = load_group_template("grouprank-released")
    messages = build_messages("fleas", ["a" * 3005, "b [2] c"], tpl)
    assert [m["role"] for m in messages] == ["user"]
    content = messages[0]["content"]
    assert "[1]. " + "a" * 3000 + "\n[2]. b [2] c\n" in content  # 3,000 characters; ids left as written
    assert "a" * 3001 not in content and "Search query: fleas" in content


def test_preset_fills_settings_left_at_their_defaults():
    parser = build_parser()
    args = parser.parse_args(["rerank", "--dataset", "dl19", "--method", "groupwise", "--preset", "grouprank-released",
                              "--top-p", "0.5", "-o", "x.trec"])
    apply_defaults(args)
    assert (args.template, args.temperature, args.max_new_tokens, args.fusion_weight, args.fusion, args.shuffle_all) == (
        "grouprank-released", 0.3, 8000, 0.6, "raw", True)
    assert args.top_p == 0.5  # given on the command line: kept
    listwise = parser.parse_args(["rerank", "--dataset", "dl19", "--preset", "grouprank-released", "-o", "x.trec"])
    with pytest.raises(RearankError, match="--method groupwise"):
        apply_defaults(listwise)
