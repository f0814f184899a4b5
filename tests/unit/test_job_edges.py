"""Run-file job edges found by mutation testing: messages, defaults, what a resume reads and reruns, the stats
written before any work, the error reported when a run ends badly."""

import json

import pytest

from rearank.errors import RearankError
from rearank.methods import METHODS, method_options
from rearank.methods.listwise import Listwise
from rearank.run import config as runconfig
from rearank.run import job
from rearank.run.files import RunWriter
from rearank.run.stats import RunStats
from rearank.types import Candidate, Query, Request, Result


def request(qid, n=3):
    return Request(Query(qid, "what?"), tuple(Candidate(f"d{i}", float(-i)) for i in range(n)))


class FakeRanker:
    """Returns each request in its first-stage order; raises ``error`` after ``ok`` results."""

    def __init__(self, error=None, ok=0):
        self.error, self.ok, self.closed, self.progress, self.seen = error, ok, False, None, []

    def rerank(self, requests, on_result=None, progress=True):
        self.progress = progress
        for i, r in enumerate(requests):
            if self.error is not None and i >= self.ok:
                raise self.error
            self.seen.append(r.query.qid)
            on_result(Result(r.query, list(r.candidates), []))
        return []

    def close(self):
        self.closed = True


def run_lines(path):
    return path.read_text().splitlines()


def test_duplicate_qid_is_named():
    job.check_unique_qids([request("q1"), request("q2")])
    with pytest.raises(RearankError) as err:
        job.check_unique_qids([request("q1"), request("q2"), request("q1")])
    assert str(err.value) == "query 'q1' appears twice in the input; qids must be unique"


def test_default_generation_budget():
    assert runconfig.default_max_new_tokens("hf", "smollm2-135m") == runconfig.EMBEDDED_MAX_NEW_TOKENS == 256
    assert runconfig.default_max_new_tokens("openai", "smollm2-135m") == runconfig.DEFAULT_MAX_NEW_TOKENS == 2048
    assert runconfig.default_max_new_tokens("hf", "Qwen/Qwen2.5-7B-Instruct") == 2048


def test_earlier_wall_below_one_second(tmp_path):
    path = tmp_path / "stats.json"
    path.write_text('{"wall_time_s": 0.5}')
    assert job.earlier_wall(path) == 0.5


def test_resume_settings_of_a_method_and_of_unknown_methods():
    assert "group_size" in runconfig.resume_settings({"method": "groupwise"})
    # a method no longer registered (a plugin uninstalled) has no own options: the shared keys only
    assert "no-such-method" not in METHODS
    assert list(runconfig.resume_settings({"method": "no-such-method"})) == list(runconfig.RESUME_KEYS)
    assert list(runconfig.resume_settings({"method": "no-such-method"}, suite=True)) == [
        *runconfig.RESUME_KEYS, *runconfig.SUITE_RESUME_KEYS]
    pointwise = runconfig.resume_settings({"method": "pointwise"})
    assert set(pointwise) == {*runconfig.RESUME_KEYS, *method_options("pointwise")}


def test_resume_check_skips_a_missing_or_empty_run(tmp_path):
    output = tmp_path / "run.trec"
    job.check_resume_settings(output, tmp_path / "none.json", {"method": "listwise"})  # nothing to continue
    output.write_text("")
    job.check_resume_settings(output, tmp_path / "none.json", {"method": "listwise"})
    output.write_text("q1 Q0 d0 1 1.0 rearank\n")
    with pytest.raises(RearankError) as err:
        job.check_resume_settings(output, tmp_path / "none.json", {"method": "listwise"})
    assert str(err.value).endswith("is missing or unreadable, so the run cannot be continued safely; "
                                   "rerun without --resume")


def test_resume_check_names_options_of_either_method(tmp_path):
    output, stats = tmp_path / "run.trec", tmp_path / "run.trec.stats.json"
    output.write_text("q1 Q0 d0 1 1.0 rearank\n")
    stats.write_text(json.dumps({"config": {"method": "listwise", "window": 20}}))
    with pytest.raises(RearankError) as err:
        job.check_resume_settings(output, stats, {"method": "groupwise", "group_size": 10})
    message = str(err.value)
    assert "group_size: None -> 10" in message and "method: 'listwise' -> 'groupwise'" in message
    assert "window: 20 -> None" in message
    assert message.endswith("resume with the same settings, or write to another --output")


@pytest.mark.parametrize("recorded", [{"mode": "listwise"}, {"method": "listwise", "mode": "listwise"}])
def test_a_run_recorded_with_the_key_mode_is_not_resumed(tmp_path, recorded):
    output, stats = tmp_path / "run.trec", tmp_path / "run.trec.stats.json"
    output.write_text("q1 Q0 d0 1 1.0 rearank\n")
    stats.write_text(json.dumps({"config": recorded}))
    with pytest.raises(RearankError) as err:
        job.check_resume_settings(output, stats, {"method": "listwise"})
    assert str(err.value) == (f"--resume: {stats} (the settings of the run in {output}) records its method under "
                              "'mode' (an earlier rearank's key), so the run cannot be resumed: start a new output "
                              "folder (or --output file) and run without --resume")
    assert output.read_text() == "q1 Q0 d0 1 1.0 rearank\n"


def test_ndcg_before_is_the_first_stage_order(tmp_path):
    output = tmp_path / "run.trec"
    output.write_text("q1 Q0 d2 1 3.0 x\nq1 Q0 d1 2 2.0 x\nq1 Q0 d0 3 1.0 x\n")
    got = job.ndcg_before_after([request("q1")], {"q1": {"d0": 1}}, output)
    assert got["before"] == 1.0 and got["after"] == pytest.approx(0.5) and got["queries"] == 1


def test_output_folder_refused(tmp_path):
    with pytest.raises(RearankError) as err:
        job.rerank_to_files([request("q1")], FakeRanker, output=tmp_path)
    assert str(err.value) == f"output {tmp_path} is a folder; give a file name"


@pytest.mark.parametrize(("kwargs", "names"), [({"traces": "run.trec"}, ("--output", "--traces")),
                                               ({"stats": "run.trec"}, ("--output", "the stats file")),
                                               ({"stats": "t.jsonl", "traces": "t.jsonl"},
                                                ("--traces", "the stats file"))])
def test_outputs_that_clash_are_named(tmp_path, kwargs, names):
    paths = {k: tmp_path / v for k, v in kwargs.items()}
    with pytest.raises(RearankError) as err:
        job.rerank_to_files([request("q1")], FakeRanker, output=tmp_path / "run.trec", **paths)
    same = tmp_path / next(iter(kwargs.values()))
    assert str(err.value) == f"{names[0]} and {names[1]} are the same file ({same}); give them different names"


def test_defaults_tag_progress_closing_and_stats_path(tmp_path):
    ranker = FakeRanker()
    output = tmp_path / "run.trec"
    job.rerank_to_files([request("q1")], lambda: ranker, output=output, stats=tmp_path / "s.json")
    assert run_lines(output)[0].split()[-1] == "rearank"
    assert ranker.progress is True and ranker.closed
    assert (tmp_path / "s.json").is_file() and not (tmp_path / "run.trec.stats.json").exists()
    kept = FakeRanker()
    job.rerank_to_files([request("q1")], lambda: kept, output=output, own_ranker=False, progress=False)
    assert kept.progress is False and not kept.closed
    assert kept.seen == ["q1"]  # without resume the finished run is made again


def test_stats_record_the_settings_before_any_work(tmp_path):
    output, config = tmp_path / "run.trec", {"method": "listwise", "model": "m"}

    def make():
        assert json.loads((tmp_path / "run.trec.stats.json").read_text())["config"] == config
        return FakeRanker()

    job.rerank_to_files([request("q1")], make, output=output, config=config, progress=False)


def test_resume_reruns_a_cut_query_and_carries_earlier_wall(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(job, "RunStats", lambda **kw: made.append(kw) or RunStats(**kw))
    output = tmp_path / "run.trec"
    requests = [request("q1"), request("q2")]
    job.rerank_to_files(requests, FakeRanker, output=output, resume=True, progress=False)  # nothing to resume yet
    lines = run_lines(output)
    output.write_text("\n".join(lines[:-1]) + "\n")  # q2 lost its last line
    stats = tmp_path / "run.trec.stats.json"
    stats.write_text(json.dumps({**json.loads(stats.read_text()), "wall_time_s": 1000.0}))
    ranker = FakeRanker()
    job.rerank_to_files(requests, lambda: ranker, output=output, resume=True, progress=False)
    assert ranker.seen == ["q2"] and run_lines(output) == lines
    job.rerank_to_files(requests, FakeRanker, output=output, progress=False)  # a fresh run starts its clock at 0
    assert [kw["earlier_s"] for kw in made] == [0.0, 1000.0, 0.0]


def test_resume_of_an_empty_run_ignores_an_old_stats_file(tmp_path, monkeypatch):
    made = []
    monkeypatch.setattr(job, "RunStats", lambda **kw: made.append(kw) or RunStats(**kw))
    output = tmp_path / "run.trec"
    output.write_text("")
    (tmp_path / "run.trec.stats.json").write_text('{"wall_time_s": 1000.0}')
    job.rerank_to_files([request("q1")], FakeRanker, output=output, resume=True, progress=False)
    assert made == [{"earlier_s": 0.0}]


def test_interrupt_says_what_was_saved(tmp_path, capsys):
    output = tmp_path / "run.trec"
    with pytest.raises(KeyboardInterrupt):
        job.rerank_to_files([request("q1"), request("q2")], lambda: FakeRanker(KeyboardInterrupt(), ok=1),
                            output=output, progress=False)
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"interrupted: 1 queries finished in this session are saved in {output}; rerun with --resume to continue")


def test_the_error_that_ended_the_run_is_the_one_reported(tmp_path, monkeypatch):
    writes = []

    def write(self, path, extra=None):
        writes.append(path)
        if len(writes) > 1:
            raise RearankError("stats: disk full")

    monkeypatch.setattr(RunStats, "write", write)
    with pytest.raises(RearankError, match="^ranker failed$"):
        job.rerank_to_files([request("q1")], lambda: FakeRanker(RearankError("ranker failed")),
                            output=tmp_path / "a.trec", progress=False)
    writes.clear()
    with pytest.raises(RearankError, match="^stats: disk full$"):  # nothing else went wrong: the stats error
        job.rerank_to_files([request("q1")], FakeRanker, output=tmp_path / "b.trec", progress=False)


def test_resume_reruns_a_query_whose_traces_were_cut(tmp_path):
    from rearank.backends.oracle import OracleBackend
    from rearank.run.files import read_traces
    from tests.engines import listwise
    from tests.unit.test_engine_listwise import request as worth_request
    from tests.unit.test_engine_listwise import shuffled_worths

    requests = [worth_request(f"q{i}", shuffled_worths(12, i)) for i in range(2)]
    qrels = {r.query.qid: {c.docid: i % 3 for i, c in enumerate(r.candidates)} for r in requests}
    output, traces = tmp_path / "run.trec", tmp_path / "run.trec.traces.jsonl"
    engine = lambda: listwise(OracleBackend(qrels), window=4, step=2)
    windows = {r.query.qid: len(Listwise(window=4, step=2).policy.windows(12)) for r in requests}
    job.rerank_to_files(requests, engine, output=output, windows=windows, progress=False)
    full = read_traces(traces)
    lines = traces.read_text().splitlines()
    traces.write_text("\n".join(lines[:-1]) + "\n")  # the last query lost its last trace; its run lines are whole
    job.rerank_to_files(requests, engine, output=output, windows=windows, resume=True, progress=False)
    again = read_traces(traces)
    assert {q: len(t) for q, t in again.items()} == {q: len(t) for q, t in full.items()} == windows


def test_an_output_that_cannot_be_opened_is_one_line(tmp_path):
    target = tmp_path / "run.trec"
    target.mkdir()  # a folder where the run file should go: the OS's reason, not Python's whole error text
    with pytest.raises(RearankError) as err:
        RunWriter(target)
    assert str(err.value) == f"{target}: cannot write output (Is a directory)"


def test_a_given_tag_reaches_the_run_lines(tmp_path):
    output = tmp_path / "run.trec"
    job.rerank_to_files([request("q1"), request("q2")], FakeRanker, output=output, tag="mine", progress=False)
    assert [line.split()[-1] for line in run_lines(output)] == ["mine"] * 6


def test_stats_are_read_as_utf8_whatever_the_locale(tmp_path, ascii_locale):
    output, stats = tmp_path / "run.trec", tmp_path / "run.trec.stats.json"
    output.write_text("q1 Q0 d0 1 1.0 rearank\n")
    config = {"method": "listwise", "model": "modèles/reranker"}
    # raw UTF-8, as a tool such as jq writes JSON back: JSON is UTF-8 whatever the locale (RFC 8259)
    stats.write_bytes(json.dumps({"wall_time_s": 2.5, "config": config}, ensure_ascii=False).encode())
    assert job.earlier_wall(stats) == 2.5
    job.check_resume_settings(output, stats, config)  # the same settings: no refusal
