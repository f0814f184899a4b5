"""The one-line face: plain strings, pairs and Candidates in; order, rank scores and traces out (oracle backend)."""

from __future__ import annotations

import pytest

from rearank import Candidate, Ranking, Request, Reranker
from rearank.api import rank_scores
from rearank.errors import RearankError
from rearank.methods import METHODS
from rearank.types import Query

# Plain strings get the docid of their position. Grades: "2" -> 3, "0" -> 1, "4" -> 1, others unjudged (0).
QRELS = {"q": {"2": 3, "0": 1, "4": 1}}
PASSAGES = ["fleas lay eggs", "dogs bark", "the flea life cycle: egg, larva, pupa, adult", "cats", "flea bites"]
# Judged order, ties keeping the input order: 2 (3), then 0 and 4 (1), then 1 and 3 (0).
EXPECTED = [2, 0, 4, 1, 3]


def test_rank_scores_are_strictly_decreasing_in_unit_interval():
    assert rank_scores(4) == [1.0, 0.75, 0.5, 0.25]  # (4 - r) / 4
    assert rank_scores(0) == []


@pytest.mark.parametrize("method", sorted(METHODS))
def test_plain_strings_are_reranked_by_the_oracle(method):
    with Reranker(backend="oracle", qrels=QRELS, method=method) as rr:
        ranking = rr.rerank("what is a flea's life cycle", PASSAGES, qid="q")
    assert isinstance(ranking, Ranking)
    assert ranking.order == EXPECTED
    assert ranking.docids == [str(i) for i in EXPECTED]
    assert [p.text for p in ranking.passages] == [PASSAGES[i] for i in EXPECTED]
    assert [p.score for p in ranking.passages] == [1.0, 0.8, 0.6, 0.4, 0.2]  # (5 - rank) / 5
    # one window / one group of 5 / one prompt per passage
    assert len(ranking.traces) == (5 if method == "pointwise" else 1)
    assert {t.status for t in ranking.traces} == {"ok"}
    assert ranking.failed_windows == 0


def test_pairs_and_candidates_keep_their_docids():
    qrels = {"q": {"b": 2, "c": 1}}
    with Reranker(backend="oracle", qrels=qrels) as rr:
        pairs = rr.rerank("x", [("a", "A"), ("b", "B"), ("c", "C")], qid="q")
        cands = rr.rerank("x", [Candidate("a", 9.0, "A"), Candidate("c", 8.0, "C"), Candidate("b", 7.0, "B")],
                          qid="q")
    assert (pairs.docids, pairs.order) == (["b", "c", "a"], [1, 2, 0])
    assert (cands.docids, cands.order) == (["b", "c", "a"], [2, 1, 0])


def test_windows_of_many_queries_share_backend_calls():
    qrels = {"0": {"1": 1}, "1": {"2": 1}, "2": {}}
    calls = []
    seen = []
    with Reranker(backend="oracle", qrels=qrels, batch_size=8) as rr:
        generate = rr.backend.generate
        rr.backend.generate = lambda prompts, settings: calls.append(len(prompts)) or generate(prompts, settings)
        rankings = rr.rerank_many([("a", ["x", "y"]), ("b", ["x", "y", "z"]),
                                   Request(Query("2", "c"), [Candidate("d", 1.0, "t"), Candidate("e", 0.0, "u")])],
                                  on_result=seen.append)
    assert calls == [3]  # one window per query, all three in one backend call
    assert [r.order for r in rankings] == [[1, 0], [2, 0, 1], [0, 1]]
    assert sorted(r.query.qid for r in seen) == ["0", "1", "2"]


@pytest.mark.parametrize(("options", "message"), [
    ({"method": "pairwise"}, "unknown method 'pairwise'"),
    ({"backend": "tgi"}, "unknown backend 'tgi'"),
    ({"window": 1}, "window must be at least 2"),
    ({"step": 30}, "step (30) must not exceed window (20)"),
    ({"group_size": 5}, "'group_size' is not an option of the listwise method"),
    ({"method": "groupwise", "fallback": "max"}, "fallback must be one of"),
    ({"temperature": -0.5}, "temperature must be at least 0"),
    ({"top_p": 0}, "top_p must be in (0, 1]"),
    ({"max_new_tokens": 0}, "max_new_tokens must be an integer of at least 1"),
    ({"template": "nope"}, "prompt template 'nope': not a builtin"),
    ({"device": "bogus"}, "backend option device='bogus' (hf): expected cpu, cuda, cuda:N or mps, got str 'bogus'"),
    ({"device": "cuda:99"}, "backend option device='cuda:99' (hf): this machine has "),
    ({"device": "mps:0"}, "expected cpu, cuda, cuda:N or mps"),
])
def test_bad_settings_fail_before_a_model_loads(options, message):
    options = {"backend": "hf", **options}
    # "no/such/model" would fail in loading; each error must come first.
    with pytest.raises(RearankError) as err:
        Reranker("no/such/model", **options)
    assert message in str(err.value)


def test_unknown_backend_option_lists_what_is_accepted():
    with pytest.raises(RearankError, match="bad options for the oracle backend.*accepts: qrels.*reranking options"):
        Reranker(backend="oracle", qrels=QRELS, device="cuda")


def test_oracle_needs_qrels_and_only_the_oracle_takes_them():
    with pytest.raises(RearankError, match="pass qrels="):
        Reranker(backend="oracle")
    with pytest.raises(RearankError, match="oracle backend only"):
        Reranker("m", backend="openai", qrels=QRELS)


@pytest.mark.parametrize(("passages", "message"), [
    ("one string", "not one string"),
    ([1, 2], "passage 0: expected a string"),
    ([("a", "x"), ("a", "y")], "docid 'a' appears twice"),
])
def test_bad_passages_are_named(passages, message):
    with Reranker(backend="oracle", qrels=QRELS) as rr, pytest.raises(RearankError, match=message):
        rr.rerank("q", passages)


@pytest.mark.parametrize(("query", "passages", "message"), [
    ("q", None, "^passages must be a list of strings, \\(docid, text\\) pairs or Candidates, not NoneType$"),
    (None, ["a", "b"], "^query 0: the query must be a text \\(str\\), got NoneType$"),
    (3, ["a"], "^query 0: the query must be a text \\(str\\), got int$"),
])
def test_a_query_or_passages_of_the_wrong_kind_are_one_clear_value_error(query, passages, message):
    # rerank("q", None) raised TypeError from len(); rerank(None, [...]) was accepted
    with Reranker(backend="oracle", qrels=QRELS) as rr, pytest.raises(ValueError, match=message) as raised:
        rr.rerank(query, passages, qid="0")
    assert isinstance(raised.value, RearankError)


def test_close_closes_the_backend():
    rr = Reranker("served-name", backend="openai", base_url="http://127.0.0.1:9/v1", max_retries=0)
    with rr:
        assert not rr.backend._client.is_closed
    assert rr.backend._client.is_closed
