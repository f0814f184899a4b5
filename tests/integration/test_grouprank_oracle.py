"""Groupwise reranking on dl19 (real data) with the groupwise oracle: ideal nDCG@10, calls per query, CLI."""

import json
import random

import pandas as pd
import pytest

from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.oracle import OracleBackend
from rearank.cli import main
from rearank.data.packs import load_qrels, load_requests
from rearank.io.trec import read_run
from rearank.measures.ir import evaluate
from rearank.methods import Groupwise
from rearank.methods.groupwise.parser import format_scores
from rearank.methods.groupwise.reward import compute_score
from rearank.run.stats import RunStats
from tests.engines import groupwise

BM25_NDCG10 = 0.5058


@pytest.fixture
def dl19_data(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return load_requests(dataset="dl19"), load_qrels("dl19")


def as_run(results):
    return {r.query.qid: [(c.docid, float(len(r.candidates) - i)) for i, c in enumerate(r.candidates)] for r in results}


def ideal_run(requests, qrels):
    """Each query's candidates sorted by their judged label: the best any reranker of this run can do."""
    run = {}
    for r in requests:
        judged = qrels.get(r.query.qid, {})
        ranked = sorted(r.candidates, key=lambda c: -judged.get(c.docid, 0))
        run[r.query.qid] = [(c.docid, float(len(ranked) - i)) for i, c in enumerate(ranked)]
    return run


def test_one_group_over_the_top_k_reaches_the_ideal_ndcg(dl19_data):
    requests, qrels = dl19_data
    stats = RunStats()
    results = groupwise(OracleBackend(qrels), group_size=100, top_k=100).rerank(
        requests, on_result=stats.add, progress=False)
    ideal = evaluate(qrels, ideal_run(requests, qrels)).aggregate["ndcg_cut_10"]
    got = evaluate(qrels, as_run(results)).aggregate["ndcg_cut_10"]
    assert got == pytest.approx(ideal, abs=1e-9)
    assert got > BM25_NDCG10 + 0.3
    assert stats.calls == len(requests) == 43 and stats.statuses == {"ok": 43}


def test_partition_sliding_and_shuffles_call_counts(dl19_data):
    requests, qrels = dl19_data
    requests = requests[:5]
    for kwargs, calls in (({"group_size": 20}, 5), ({"group_size": 30}, 4), ({"group_size": 20, "shuffles": 3}, 15),
                          ({"group_size": 20, "group_step": 10}, 9)):
        stats = RunStats()
        results = groupwise(OracleBackend(qrels), **kwargs).rerank(requests, on_result=stats.add,
                                                                            progress=False)
        assert stats.to_dict()["calls_per_query"] == calls, kwargs
        # the oracle's scores are absolute, so every grouping reaches the ideal order of the top-100 too
        ideal = evaluate(qrels, ideal_run(requests, qrels)).per_query
        got = evaluate(qrels, as_run(results)).per_query
        assert {q: v["ndcg_cut_10"] for q, v in got.items()} == pytest.approx(
            {q: v["ndcg_cut_10"] for q, v in ideal.items()})


def test_fusion_blends_toward_bm25(dl19_data):
    requests, qrels = dl19_data
    ndcg = {}
    for alpha in (1.0, 0.6, 0.0):
        results = groupwise(OracleBackend(qrels), group_size=100, fusion_weight=alpha).rerank(
            requests, progress=False)
        ndcg[alpha] = evaluate(qrels, as_run(results)).aggregate["ndcg_cut_10"]
    assert ndcg[0.0] == pytest.approx(BM25_NDCG10, abs=1e-4)  # pure BM25 scores: the BM25 order
    assert ndcg[0.0] < ndcg[0.6] <= ndcg[1.0]


def test_cli_groupwise_oracle(dl19_data, tmp_path, capsys):
    out = tmp_path / "g.trec"
    assert main(["rerank", "--dataset", "dl19", "--backend", "oracle", "--method", "groupwise", "--group-size", "25",
                 "--max-queries", "4", "--no-progress", "--output", str(out)]) == 0
    assert "after" in capsys.readouterr().out
    stats = json.loads((tmp_path / "g.trec.stats.json").read_text())
    assert stats["calls"] == 16 and stats["calls_per_query"] == 4
    traces = [json.loads(line) for line in (tmp_path / "g.trec.traces.jsonl").read_text().splitlines()]
    assert len(traces) == 16 and {t["status"] for t in traces} == {"ok"}
    assert len(read_run(out)) == 4


def test_synthesized_groupwise_rows_reward_the_oracle(dl21, monkeypatch, tmp_path):
    """`rearank synth --mode groupwise` rows: the oracle's completion earns the full R_rank and
    R_recall from the row's ground truth alone; a shuffled one earns less."""
    from data_synthesis import pipeline as synthesis

    monkeypatch.setenv("REARANK_DATA", str(dl21.parents[1]))
    requests, qrels = load_requests(dataset="dl21", max_queries=8), load_qrels("dl21")
    config = synthesis.SynthConfig(samples_per_query=2, mode="groupwise", val_fraction=0.0)
    synthesis.synthesize(requests, qrels, tmp_path, config, progress=False)
    rows = pd.read_parquet(tmp_path / "train.parquet")
    assert len(rows) > 5
    oracle = OracleBackend(qrels).answer_format(Groupwise())
    rng = random.Random(0)
    for _, row in rows.iterrows():
        assert "<reason>" in row["prompt"][-1]["content"]
        prompt = Prompt(tuple(row["prompt"]), row["extra_info"]["qid"], tuple(row["extra_info"]["docids"]))
        text = oracle.generate([prompt], SamplingSettings())[0].text
        truth = row["reward_model"]["ground_truth"]
        best = compute_score(row["data_source"], text, truth, max_label=3)
        assert (best["r_rank"], best["r_recall"]) == (pytest.approx(1.0), 1.0) and best["r_dist"] > 0.95
        scores = [rng.randint(0, 10) for _ in row["extra_info"]["docids"]]
        noisy = compute_score(row["data_source"], f"<reason>r</reason><answer>{format_scores(scores)}</answer>", truth,
                              max_label=3)
        assert noisy["score"] <= best["score"]
