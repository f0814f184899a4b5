"""Edges of rearank.measures.ir that mutation testing found untested (docs/testing.md): measure-name parsing, its
errors, and queries the run lacks."""

from __future__ import annotations

import ir_measures
import pytest

from rearank.errors import RearankError
from rearank.measures.ir import _split_outside_parens, evaluate, parse_measures, trec_name


def test_commas_split_measures_only_outside_parentheses():
    assert _split_outside_parens("x(a,b),y") == ["x(a,b)", "y"]
    assert _split_outside_parens("x(a(b),c),y") == ["x(a(b),c)", "y"]
    assert _split_outside_parens("ndcg_cut.1,5,P@5") == ["ndcg_cut.1,5", "P@5"]  # digits continue a trec list
    assert parse_measures(["nDCG(dcg='exp-log2')@10,P@5"]) == [ir_measures.parse_measure("nDCG(dcg='exp-log2')@10"),
                                                              ir_measures.parse_measure("P@5")]
    assert parse_measures(["nDCG(dcg='exp-log2')"]) == [ir_measures.parse_measure("nDCG(dcg='exp-log2')")]


@pytest.mark.parametrize(("name", "cutoff"), [("P@0", "0"), ("ndcg_cut.0", "0"), ("nDCG@0", "0")])
def test_a_cutoff_below_1_is_refused_by_name(name, cutoff):
    with pytest.raises(RearankError) as err:
        parse_measures([name])
    assert str(err.value) == f"measure {name!r}: the cutoff must be a whole number of at least 1, got {cutoff}"


def test_unknown_and_missing_measures_are_one_line_errors():
    with pytest.raises(RearankError) as err:
        parse_measures(["bogus"])
    assert str(err.value) == ("unknown measure 'bogus'; use trec_eval names (ndcg_cut.10, recall.100, map_cut.100, "
                              "map, recip_rank, P.10) or ir-measures names (nDCG@10, R@100, AP@100, RR@10, P@10)")
    with pytest.raises(RearankError) as err:
        parse_measures(["", " , "])
    assert str(err.value) == "no measure given"
    with pytest.raises(RearankError) as err:
        evaluate({}, {"q": [("d", 1.0)]})
    assert str(err.value) == "the qrels hold no judgments"


def test_a_measure_trec_eval_does_not_name_keeps_its_own_name():
    assert trec_name(ir_measures.parse_measure("Judged@10")) == "Judged@10"
    assert trec_name(ir_measures.parse_measure("nDCG@10")) == "ndcg_cut_10"
    assert trec_name(ir_measures.parse_measure("RR")) == "recip_rank"


def test_judged_queries_the_run_lacks_or_leaves_empty_count_zero():
    qrels = {"q1": {"a": 1}, "q2": {"a": 1}, "q3": {"b": 2}}
    result = evaluate(qrels, {"q1": [("a", 1.0)], "q2": [], "other": [("a", 1.0)]}, ["nDCG@10", "P@1"])
    assert result.per_query["q2"] == result.per_query["q3"] == {"ndcg_cut_10": 0.0, "P_1": 0.0}
    assert result.per_query["q1"] == {"ndcg_cut_10": 1.0, "P_1": 1.0}
    assert result.aggregate == {"ndcg_cut_10": pytest.approx(1 / 3), "P_1": pytest.approx(1 / 3)}
    assert result.missing == ("q2", "q3") and result.unjudged == 1


@pytest.mark.parametrize("run", [{"other": [("a", 1.0)]}, {"q1": []}, {}])
def test_a_run_sharing_no_judged_query_with_the_qrels_scores_zero(run):
    """ir-measures is not called at all then: the 0.0 defaults are the result (mutation: 1.0 or None survived)."""
    result = evaluate({"q1": {"a": 1}}, run, ["nDCG@10", "P@1"])
    assert result.per_query == {"q1": {"ndcg_cut_10": 0.0, "P_1": 0.0}}
    assert result.aggregate == {"ndcg_cut_10": 0.0, "P_1": 0.0}
    assert result.missing == ("q1",) and result.unjudged == len(set(run) - {"q1"})
