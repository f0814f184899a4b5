"""The job layer: a resumed run's statistics carry the earlier sessions' wall time."""

import json

from rearank.backends.oracle import OracleBackend
from rearank.run import job
from rearank.run.files import read_traces
from tests.engines import listwise
from tests.unit.test_engine_listwise import request, shuffled_worths


def test_a_resume_adds_the_earlier_wall_time(tmp_path):
    requests = [request(f"q{i}", shuffled_worths(12, i)) for i in range(4)]
    qrels = {r.query.qid: {c.docid: i % 3 for i, c in enumerate(r.candidates)} for r in requests}
    output = tmp_path / "run.trec"

    def engine():
        return listwise(OracleBackend(qrels), window=4, step=2)

    job.rerank_to_files(requests[:2], engine, output=output, progress=False)
    stats_path = tmp_path / "run.trec.stats.json"
    earlier = json.loads(stats_path.read_text())
    stats_path.write_text(json.dumps({**earlier, "wall_time_s": 1000.0}))  # a long first session
    job.rerank_to_files(requests, engine, output=output, resume=True, progress=False)
    resumed = json.loads(stats_path.read_text())
    assert resumed["queries"] == 4 and resumed["resumed_queries"] == 2
    assert 1000.0 <= resumed["wall_time_s"] < 1060.0
    assert resumed["queries_per_s"] == 4 / resumed["wall_time_s"]
    assert sorted(read_traces(tmp_path / "run.trec.traces.jsonl")) == ["q0", "q1", "q2", "q3"]


def test_an_unreadable_earlier_wall_time_counts_as_zero(tmp_path):
    path = tmp_path / "stats.json"
    for text in ("not json", '{"wall_time_s": "x"}', '{"wall_time_s": -1}', '{"wall_time_s": Infinity}', "{}"):
        path.write_text(text)
        assert job.earlier_wall(path) == 0.0
    path.write_text('{"wall_time_s": 12.5}')
    assert job.earlier_wall(path) == 12.5
    assert job.earlier_wall(tmp_path / "missing.json") == 0.0
