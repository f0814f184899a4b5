"""The face's rerank_run on the dl19 pack: the same files and figures as ``rearank rerank --backend oracle``."""

from __future__ import annotations

import json

from rearank import Reranker
from rearank.data.packs import load_qrels
from rearank.io.trec import read_run


def test_rerank_run_reaches_the_oracle_ceiling_and_resumes(dl19, tmp_path, capsys):
    qrels = load_qrels(dl19 / "qrels.txt")
    out = tmp_path / "oracle.trec"
    with Reranker(backend="oracle", qrels=qrels) as rr:
        summary = rr.rerank_run(dl19 / "run.bm25.top100.trec", topics=dl19 / "topics.tsv", docs=dl19 / "docs.tsv",
                                output=out, qrels=qrels)
        # The README's figure for `rearank rerank --dataset dl19 --backend oracle`: 0.5058 -> 0.8922.
        assert round(summary["ndcg_cut_10"]["before"], 4) == 0.5058
        assert round(summary["ndcg_cut_10"]["after"], 4) == 0.8922
        assert summary["queries"] == 43 and summary["calls"] == 43 * 9  # 9 windows of 20 by 10 over 100
        stats = json.loads(out.with_name(out.name + ".stats.json").read_text())
        assert stats["ndcg_cut_10"] == summary["ndcg_cut_10"]
        traces = out.with_name(out.name + ".traces.jsonl").read_text().splitlines()
        assert len(traces) == 43 * 9
        first = out.read_text()
        # Cut the run in the middle of a query, as a kill would; resume reranks only what is missing.
        lines = first.splitlines(keepends=True)
        out.write_text("".join(lines[:250]) + lines[250][:7])
        again = rr.rerank_run(dl19 / "run.bm25.top100.trec", topics=dl19 / "topics.tsv", docs=dl19 / "docs.tsv",
                              output=out, resume=True)
    assert "resume: 2 of 43 queries already in" in capsys.readouterr().err  # 250 lines = 2 whole queries + 50
    # After a resume the stats count the earlier queries too, as an uninterrupted run's do.
    assert again["resumed_queries"] == 2 and again["queries"] == 43 and again["calls"] == 43 * 9
    assert sorted(out.read_text().splitlines()) == sorted(first.splitlines())
    assert len(read_run(out)) == 43


def test_a_face_run_resumes_only_with_the_settings_it_recorded(dl19, tmp_path):
    import pytest

    from rearank.errors import RearankError

    qrels = load_qrels(dl19 / "qrels.txt")
    out = tmp_path / "oracle.trec"
    inputs = {"topics": dl19 / "topics.tsv", "docs": dl19 / "docs.tsv", "max_queries": 2, "progress": False}
    with Reranker(backend="oracle", qrels=qrels, window=10, step=5) as rr:
        rr.rerank_run(dl19 / "run.bm25.top100.trec", output=out, **inputs)
        assert rr.config.record()["window"] == 10
    recorded = json.loads(out.with_name(out.name + ".stats.json").read_text())["config"]
    assert (recorded["method"], recorded["window"], recorded["step"], recorded["template"]) == ("listwise", 10, 5,
                                                                                          "rearank")
    with Reranker(backend="oracle", qrels=qrels) as rr, pytest.raises(RearankError, match="window: 10 -> 20"):
        rr.rerank_run(dl19 / "run.bm25.top100.trec", output=out, resume=True, **inputs)
