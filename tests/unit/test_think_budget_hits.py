"""``think_budget_hits``: the windows whose reasoning the backend closed at ``max_think_tokens`` are counted in the
run's statistics, recorded in the traces, and counted again from them when a run resumes."""

from __future__ import annotations

import dataclasses
import json

from rearank import Reranker

RUN = "q1 Q0 d1 1 3.0 bm25\nq1 Q0 d2 2 2.0 bm25\nq1 Q0 d3 3 1.0 bm25\nq2 Q0 d1 1 2.0 bm25\nq2 Q0 d3 2 1.0 bm25\n"


def test_think_budget_hits_count_the_windows_cut_and_survive_a_resume(tmp_path):
    files = {"run": RUN, "topics": "q1\tfirst question\nq2\tsecond question\n",
             "docs": "d1\tpassage one\nd2\tpassage two\nd3\tpassage three\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    inputs = {name: tmp_path / name for name in files}
    out = tmp_path / "out.trec"
    with Reranker(backend="oracle", qrels={"q1": {"d3": 2}, "q2": {"d3": 1}}, window=2, step=1) as rr:
        generate = rr.engine.backend.generate

        def budget_hit_on_q1(prompts, settings):  # q1's windows (3 passages, window 2 by 1: two) hit the budget
            return [dataclasses.replace(g, think_budget_hit=p.qid == "q1")
                    for p, g in zip(prompts, generate(prompts, settings))]

        rr.engine.backend.generate = budget_hit_on_q1
        stats = rr.rerank_run(**inputs, output=out, progress=False)
        assert (stats["calls"], stats["think_budget_hits"]) == (3, 2)
        traces = [json.loads(line) for line in out.with_name("out.trec.traces.jsonl").read_text().splitlines()]
        assert sorted((t["qid"], t["think_budget_hit"]) for t in traces) == [("q1", True), ("q1", True),
                                                                             ("q2", False)]
        assert json.loads(out.with_name("out.trec.stats.json").read_text())["think_budget_hits"] == 2
        resumed = rr.rerank_run(**inputs, output=out, resume=True, progress=False)  # nothing left: from the traces
    assert (resumed["resumed_queries"], resumed["think_budget_hits"]) == (2, 2)
