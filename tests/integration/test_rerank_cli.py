"""`rearank rerank` end to end on dl19 with the oracle backend: outputs, resume after an interrupt, errors."""

import itertools
import json

import pytest

from rearank.backends import registry
from rearank.backends.oracle import OracleBackend
from rearank.cli import main
from rearank.data.packs import load_requests
from rearank.io.requests_jsonl import write_requests
from rearank.io.trec import read_run


@pytest.fixture
def dl19_env(dl19, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(dl19.parents[1]))
    return dl19


def run_lines(path):
    return [line.split() for line in path.read_text().splitlines()]


def test_rerank_dataset_writes_run_traces_stats_and_ndcg(dl19_env, tmp_path, capsys):
    out = tmp_path / "run.trec"
    assert main(["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "5", "--no-progress",
                 "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "nDCG@10 on 5 judged queries: before" in printed
    lines = run_lines(out)
    assert len(lines) == 500 and len({f[0] for f in lines}) == 5
    for _, group in itertools.groupby(lines, key=lambda f: f[0]):
        group = list(group)
        assert [int(f[3]) for f in group] == list(range(1, 101))
        scores = [float(f[4]) for f in group]
        assert all(a > b for a, b in itertools.pairwise(scores))
    traces = [json.loads(line) for line in (tmp_path / "run.trec.traces.jsonl").read_text().splitlines()]
    assert len(traces) == 45 and {t["status"] for t in traces} == {"ok"}
    assert set(traces[0]) >= {"qid", "start", "end", "pass_index", "prompt_tokens", "completion_tokens",
                              "raw_output", "permutation", "status", "latency_s"}
    stats = json.loads((tmp_path / "run.trec.stats.json").read_text())
    assert stats["queries"] == 5 and stats["calls"] == 45 and stats["status_counts"]["ok"] == 45
    assert stats["ndcg_cut_10"]["after"] > stats["ndcg_cut_10"]["before"]
    assert f"after {stats['ndcg_cut_10']['after']:.4f}" in printed


def test_interrupt_leaves_whole_queries_and_resume_completes(dl19_env, tmp_path, monkeypatch):
    full = tmp_path / "full.trec"
    args = ["rerank", "--dataset", "dl19", "--backend", "oracle", "--max-queries", "8", "--batch-size", "2",
            "--no-progress"]
    assert main([*args, "--output", str(full)]) == 0

    class Interrupted(OracleBackend):
        calls = 0

        def generate(self, prompts, settings):
            Interrupted.calls += 1
            if Interrupted.calls == 25:  # mid-way through the third pair of queries
                raise KeyboardInterrupt
            return super().generate(prompts, settings)

    real = registry.make_backend
    monkeypatch.setattr(registry, "make_backend", lambda name, model, **o: Interrupted(o["qrels"]))
    out = tmp_path / "run.trec"
    assert main([*args, "--output", str(out)]) == 130
    partial = read_run(out)
    assert len(partial) == 4 and all(len(v) == 100 for v in partial.values())
    traces = (tmp_path / "run.trec.traces.jsonl").read_text().splitlines()
    assert {json.loads(t)["qid"] for t in traces} == set(partial)
    monkeypatch.setattr(registry, "make_backend", real)
    assert main([*args, "--output", str(out), "--resume"]) == 0
    assert out.read_text().splitlines() == full.read_text().splitlines()
    assert len((tmp_path / "run.trec.traces.jsonl").read_text().splitlines()) == 8 * 9
    stats = json.loads((tmp_path / "run.trec.stats.json").read_text())
    assert stats["resumed_queries"] == 4
    # like the uninterrupted run: 8 queries x 9 windows (schedule(100, 20, 10)), all parsed ok
    assert (stats["queries"], stats["calls"], stats["status_counts"]["ok"]) == (8, 72, 72)


def test_requests_jsonl_input_with_rankgpt_prompt_and_groupwise_mode(dl19, tmp_path):
    requests = load_requests(run=dl19 / "run.bm25.top100.trec", topics=dl19 / "topics.tsv", docs=dl19 / "docs.tsv",
                             max_queries=3)
    write_requests(tmp_path / "req.jsonl", requests)
    common = ["rerank", "--requests", str(tmp_path / "req.jsonl"), "--qrels", str(dl19 / "qrels.txt"),
              "--backend", "oracle", "--no-progress"]
    assert main([*common, "--template", "rankgpt", "--top-k", "30", "--output", str(tmp_path / "a.trec")]) == 0
    run = read_run(tmp_path / "a.trec")
    assert set(run) == {r.query.qid for r in requests}
    for request in requests:  # beyond top-k: first-stage order, after the reranked head
        assert [d for d, _ in run[request.query.qid][30:]] == [c.docid for c in request.candidates[30:]]
    assert main([*common, "--method", "groupwise", "--group-size", "10", "--output", str(tmp_path / "g.trec")]) == 0
    assert len(read_run(tmp_path / "g.trec")) == 3


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--run", "nope.trec", "--topics", "t.tsv", "--docs", "d.tsv"], "nope.trec"),
        (["--run", "x.trec"], "--run needs --topics and --docs"),
        (["--dataset", "dl19", "--template", "BADFILE"], "BADFILE"),
        (["--dataset", "dl19", "--step", "30"], "step (30) must not exceed window (20)"),
        (["--dataset", "dl19", "--backend-option", "novalue"], "expected KEY=VALUE"),
        (["--dataset", "dl19", "--backend-option", "colour=red"], "bad options for the oracle backend"),
        (["--dataset", "nosuch"], "unknown dataset 'nosuch'"),
    ],
)
def test_bad_input_is_one_clear_line(dl19_env, tmp_path, capsys, extra, needle):
    if "BADFILE" in extra:
        bad = tmp_path / "bad.yaml"
        bad.write_text('system: hi\npassage_user: "[{index}] {passage}"\npassage_assistant: ok\npost: "{qury}"\n')
        extra = [str(bad) if a == "BADFILE" else a for a in extra]
        needle = "field 'post': unknown placeholder {qury}"
    code = main(["rerank", *extra, "--backend", "oracle", "--no-progress", "--output", str(tmp_path / "r.trec")])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_oracle_without_qrels_is_a_clear_error(dl19, tmp_path, capsys):
    requests = load_requests(run=dl19 / "run.bm25.top100.trec", topics=dl19 / "topics.tsv", docs=dl19 / "docs.tsv",
                             max_queries=1)
    write_requests(tmp_path / "req.jsonl", requests)
    code = main(["rerank", "--requests", str(tmp_path / "req.jsonl"), "--backend", "oracle",
                 "--output", str(tmp_path / "r.trec")])
    assert code == 2 and "pass --qrels" in capsys.readouterr().err
