"""`rearank rerank --strategy tdpart` on dl19 with the oracle: fewer model calls and sequential rounds per query
than the sliding window at an nDCG@10 no lower; the settings recorded; a resume after an interrupt completes
the same run; the Python face and the server take the strategy."""

import json

import pytest

from rearank.api import Reranker
from rearank.backends import registry
from rearank.backends.oracle import OracleBackend
from rearank.cli import main
from rearank.data import packs
from rearank.errors import RearankError
from rearank.io.trec import read_run


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


def rerank(tmp_path, name, *flags):
    out = tmp_path / f"{name}.trec"
    assert main(["rerank", "--dataset", "dl19", "--backend", "oracle", "--no-progress", "--output", str(out),
                 *flags]) == 0
    return out, json.loads((tmp_path / f"{name}.trec.stats.json").read_text())


def test_tdpart_needs_fewer_calls_and_rounds_than_the_sliding_window_at_no_lower_ndcg(dl19_env, tmp_path):
    _, sliding = rerank(tmp_path, "sliding")
    _, tdpart = rerank(tmp_path, "tdpart", "--strategy", "tdpart")
    assert sliding["queries"] == tdpart["queries"] == 43
    assert sliding["calls_per_query"] == sliding["rounds_per_query"] == 9
    assert tdpart["calls_per_query"] < 8 and tdpart["rounds_per_query"] < 4
    assert tdpart["ndcg_cut_10"]["after"] >= sliding["ndcg_cut_10"]["after"]
    config = tdpart["config"]
    assert (config["strategy"], config["pivot"], config["budget"]) == ("tdpart", 10, 100)
    traces = [json.loads(line) for line in (tmp_path / "tdpart.trec.traces.jsonl").read_text().splitlines()]
    assert len(traces) == tdpart["calls"] and {t["round"] for t in traces} <= {0, 1, 2, 3, 4}
    first = [t for t in traces if t["qid"] == traces[0]["qid"]]
    assert [(t["round"], t["partition"]) for t in first[:6]] == [(0, 0), *((1, p) for p in range(5))]


def test_the_papers_budget_cuts_candidates(dl19_env, tmp_path):
    _, wide = rerank(tmp_path, "wide", "--strategy", "tdpart")
    _, paper = rerank(tmp_path, "paper", "--strategy", "tdpart", "--budget", "20")
    assert paper["calls_per_query"] < wide["calls_per_query"]
    assert paper["ndcg_cut_10"]["after"] < wide["ndcg_cut_10"]["after"]


def test_an_interrupted_tdpart_run_resumes_to_the_same_run(dl19_env, tmp_path, monkeypatch):
    args = ["--strategy", "tdpart", "--max-queries", "6", "--batch-size", "3"]
    full, _ = rerank(tmp_path, "full", *args)

    class Interrupted(OracleBackend):
        calls = 0

        def generate(self, prompts, settings):
            Interrupted.calls += 1
            if Interrupted.calls == 6:
                raise KeyboardInterrupt
            return super().generate(prompts, settings)

    real = registry.make_backend
    monkeypatch.setattr(registry, "make_backend", lambda name, model, **o: Interrupted(o["qrels"]))
    cut = tmp_path / "cut.trec"
    assert main(["rerank", "--dataset", "dl19", "--backend", "oracle", "--no-progress", "--output", str(cut),
                 *args]) == 130
    assert 0 < len(cut.read_text().splitlines()) < len(full.read_text().splitlines())
    monkeypatch.setattr(registry, "make_backend", real)
    cut, stats = rerank(tmp_path, "cut", *args, "--resume")
    assert read_run(cut) == read_run(full)
    assert stats["resumed_queries"] > 0
    assert stats["queries"] == 6


def test_a_resume_with_another_strategy_is_refused(dl19_env, tmp_path, capsys):
    out, _ = rerank(tmp_path, "run", "--strategy", "tdpart", "--max-queries", "2")
    assert main(["rerank", "--dataset", "dl19", "--backend", "oracle", "--no-progress", "--output", str(out),
                 "--max-queries", "2", "--resume"]) == 2
    assert "other settings (strategy: 'tdpart' -> 'sliding')" in capsys.readouterr().err


def test_the_python_face_ranks_with_tdpart_and_refuses_bad_settings(dl19_env):
    qrels = packs.load_qrels(dl19_env / "qrels.txt")
    request = packs.load_requests(dataset="dl19", max_queries=1)[0]
    reranker = Reranker(backend="oracle", qrels=qrels, strategy="tdpart")
    ranking = reranker.rerank(request.query.text, list(request.candidates), qid=request.query.qid)
    grades = [qrels[request.query.qid].get(docid, 0) for docid in ranking.docids[:10]]
    assert grades == sorted(grades, reverse=True)
    assert max(t.round for t in ranking.traces) + 1 < len(ranking.traces)  # windows of a round went together
    with pytest.raises(RearankError, match=r"pivot \(25\) must be below window"):
        Reranker(backend="oracle", qrels=qrels, strategy="tdpart", pivot=25)
