"""Top-down partitioning (listwise ``strategy="tdpart"``): the schedule, its windows and rounds through the
engine against the sliding window, the oracle's ideal order, and its settings."""

import pytest

from rearank.backends.oracle import OracleBackend
from rearank.errors import RearankError
from rearank.methods import Listwise
from rearank.methods.listwise.tdpart import TopDown
from rearank.run.stats import RunStats
from tests.engines import listwise
from tests.unit.test_engine_in_flight import Jittery, plain
from tests.unit.test_engine_listwise import SortingBackend, request, shuffled_worths


def run_schedule(worth, **settings):
    """Drive :class:`TopDown` over ``range(len(worth))`` with an ideal ranker (higher worth first, ties in
    presented order); return its final order and the window sizes of each round."""
    topdown = TopDown(list(range(len(worth))), **settings)
    rounds = []
    while not topdown.done:
        windows = topdown.windows()
        rounds.append([len(w.ids) for w in windows])
        topdown.advance([sorted(w.ids, key=lambda i: -worth[i]) for w in windows])
    return topdown.order(), rounds


def test_depth_100_is_three_rounds_of_one_five_and_one_windows_and_finds_the_true_top():
    worth = [0] * 100
    for position, value in ((3, 9), (15, 8), (40, 7), (77, 6), (99, 5)):  # beyond the top window: 40, 77, 99
        worth[position] = value
    order, rounds = run_schedule(worth, window=20, pivot=10, budget=100)
    assert rounds == [[20], [20, 20, 20, 20, 5], [12]]  # 9 candidates + 3 that beat the pivot; 7 windows
    assert order[:5] == [3, 15, 40, 77, 99]
    assert sorted(order) == list(range(100))


def test_when_no_partition_beats_the_pivot_two_rounds_suffice():
    worth = list(range(100, 0, -1))  # the first stage is already ideal
    order, rounds = run_schedule(worth, window=20, pivot=10, budget=100)
    assert rounds == [[20], [20, 20, 20, 20, 5]]
    assert order == list(range(100))


def test_a_partition_presents_the_pivot_first_then_its_slice_of_the_list():
    topdown = TopDown(list(range(45)), window=20, pivot=10, budget=20)
    topdown.advance([list(range(20))])
    assert topdown.chosen == 9
    windows = topdown.windows()
    assert [(w.start, w.end) for w in windows] == [(20, 39), (39, 45)]
    assert windows[0].ids == (9, *range(20, 39)) and windows[1].ids == (9, *range(39, 45))


def test_candidates_over_the_budget_stay_above_the_pivot_unranked():
    worth = [0] * 60
    for position in range(20, 60):
        worth[position] = position  # everything beyond the top window beats its pivot
    order, rounds = run_schedule(worth, window=20, pivot=2, budget=5)
    pivot = 1  # the top window is all zeros: ties keep presented order, so rank 2 is position 1
    assert rounds[:2] == [[20], [20, 20, 3]]
    # the next level ranks the first 5 candidates (position 0, then the best of the first partition); the others
    # follow in the order they were found, then the pivot
    assert order[:5] == [38, 37, 36, 35, 0]
    assert order[5:41] == [*range(34, 19, -1), *range(57, 38, -1), 59, 58] and order[41] == pivot


def test_a_short_list_is_one_window_and_one_passage_none():
    assert run_schedule([1, 3, 2], window=20, pivot=10, budget=20) == ([1, 2, 0], [[3]])
    assert run_schedule([1], window=20, pivot=10, budget=20) == ([0], [])


def one_hundred(qid="q"):
    """A good first stage: worth falls with the rank, but three passages deep in the list are the best."""
    worths = [100 - i for i in range(100)]
    for position in (40, 77, 99):
        worths[position] += 200
    return request(qid, worths)


def true_order(req):
    worth = {c.docid: int(c.text.rsplit(" ", 1)[1]) for c in req.candidates}
    return sorted(worth, key=lambda d: -worth[d])


def test_engine_counts_at_depth_100_against_the_sliding_window():
    req = one_hundred()
    sliding = listwise(SortingBackend()).rerank([req], progress=False)[0]
    backend = SortingBackend()
    tdpart = listwise(backend, strategy="tdpart").rerank([req], progress=False)[0]
    stats = {}
    for name, result in (("sliding", sliding), ("tdpart", tdpart)):
        stats[name] = RunStats()
        stats[name].add(result)
    assert (stats["sliding"].calls, stats["sliding"].rounds) == (9, 9)
    assert (stats["tdpart"].calls, stats["tdpart"].rounds) == (7, 3)
    assert backend.batches == [1, 5, 1]  # a round's windows go to the backend together
    assert [(t.round, t.partition) for t in tdpart.traces] == [(0, 0), *((1, p) for p in range(5)), (2, 0)]
    assert [c.docid for c in tdpart.candidates[:10]] == true_order(req)[:10]
    assert [c.docid for c in tdpart.candidates[:10]] == [c.docid for c in sliding.candidates[:10]]


def test_the_oracle_gives_the_ideal_order_of_the_judged_top():
    req = one_hundred()
    grades = {c.docid: 3 - i // 4 for i, c in enumerate(reversed(req.candidates)) if i < 12}  # 12 judged, last
    results = listwise(OracleBackend({"q": grades}), strategy="tdpart").rerank([req], progress=False)
    top = [c.docid for c in results[0].candidates[:12]]
    assert [grades[d] for d in top] == sorted(grades.values(), reverse=True)
    assert all(t.status == "ok" for t in results[0].traces)


@pytest.mark.parametrize("concurrency", [1, 4, "auto"])
def test_windows_in_flight_give_the_batches_results_and_traces(concurrency):
    reqs = [request(f"q{i}", shuffled_worths(30 + 9 * i, i)) for i in range(6)]
    batched = listwise(SortingBackend(), strategy="tdpart", window=8, pivot=3, batch_size=5).rerank(
        reqs, progress=False)
    backend = Jittery(seed=3)
    engine = listwise(backend, strategy="tdpart", window=8, pivot=3, concurrency=concurrency)
    assert plain(engine.rerank(reqs, progress=False)) == plain(batched)


def test_a_failed_window_keeps_its_presented_order_and_the_query_finishes():
    req = request("q", shuffled_worths(50, 2), text="fail")
    result = listwise(SortingBackend(), strategy="tdpart").rerank([req], progress=False)[0]
    assert {t.status for t in result.traces} == {"error"}
    assert [c.docid for c in result.candidates] == [c.docid for c in req.candidates]


def test_task_count_is_unknown_for_tdpart_and_the_sliding_count_otherwise():
    assert Listwise(strategy="tdpart").task_count(100) is None
    assert Listwise().task_count(100) == 9


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"strategy": "bubble"}, "strategy must be one of sliding, tdpart"),
    ({"strategy": "tdpart", "pivot": 20}, r"pivot \(20\) must be below window \(20\)"),
    ({"strategy": "tdpart", "pivot": 10, "budget": 9}, r"budget \(9\) must be at least pivot \(10\)"),
    ({"strategy": "tdpart", "passes": 2}, "passes .* is for the sliding strategy"),
    ({"strategy": "tdpart", "pivot": 0}, "pivot must be at least 1"),
])
def test_bad_tdpart_settings_are_one_line_errors(kwargs, message):
    with pytest.raises(RearankError, match=message):
        Listwise(**kwargs)


def test_the_server_ranks_with_tdpart_and_reports_rounds_and_partitions():
    import httpx

    from tests.serving import DOCS, QRELS, QUERY, TEXTS, TOPICS, oracle_service, running

    # window 3, pivot 2 over 6: the top window [0,1,2] by grade [1,0,3] -> [2,0,1], pivot doc 0; partitions
    # (0; 3,4) and (0; 5) put doc 4 (grade 2) above it; the candidates [2,4] are ranked last: [2,4,0,1,3,5]
    options = {"strategy": "tdpart", "window": 3, "pivot": 2}
    with running(oracle_service(TOPICS, DOCS, QRELS, options=options)) as url:
        body = httpx.post(url + "/v1/rerank", json={"query": QUERY, "documents": TEXTS}).json()
    assert [r["index"] for r in body["results"]] == [2, 4, 0, 1, 3, 5]
    windows = body["rearank"]["windows"]
    assert [(w["round"], w["partition"]) for w in windows] == [(0, 0), (1, 0), (1, 1), (2, 0)]
