"""rearank.run.files: the incremental run and traces files, and what a resume keeps of an interrupted run."""

from __future__ import annotations

import json
import logging

import pytest

from rearank.errors import FormatError, RearankError
from rearank.run.files import RunWriter, ranked_pairs, read_traces, recover, trace_record
from rearank.types import Candidate, Query, Result, WindowTrace


def trace(qid: str, start: int = 0, **changes) -> WindowTrace:
    fields = {"qid": qid, "start": start, "end": start + 2, "pass_index": 0, "prompt_tokens": 10,
              "completion_tokens": 3, "raw_output": "[2] > [1]", "permutation": (1, 0), "status": "ok",
              "latency_s": 0.5}
    return WindowTrace(**{**fields, **changes})


def result(qid: str, docids: list[str], windows: int = 1) -> Result:
    return Result(Query(qid, "text"), tuple(Candidate(d, 0.0, "") for d in docids),
                  tuple(trace(qid, 2 * i) for i in range(windows)))


def run_line(qid: str, docid: str, rank: int, score: float, tag: str = "t") -> str:
    return f"{qid} Q0 {docid} {rank} {score} {tag}"


def test_ranked_pairs_keep_the_order_with_falling_scores():
    assert ranked_pairs(result("q", ["c", "a", "b"])) == [("c", 3.0), ("a", 2.0), ("b", 1.0)]
    assert ranked_pairs(result("q", [])) == []


def test_trace_records_read_back(tmp_path):
    path = tmp_path / "traces.jsonl"
    written = [trace("q1"), trace("q2", think_tokens=7, think_budget_hit=True), trace("q1", 2)]
    path.write_text("".join(json.dumps(trace_record(t)) + "\n" for t in written) + "\n")  # a blank last line
    assert trace_record(written[0])["permutation"] == [1, 0]
    assert read_traces(path) == {"q1": [written[0], written[2]], "q2": [written[1]]}
    path.write_text(json.dumps(trace_record(written[0])) + "\n" + '{"qid": "q1"}\n')
    with pytest.raises(FormatError, match=r"traces.jsonl:2: not a window trace"):
        read_traces(path)


def test_writer_writes_traces_then_run_lines_with_the_tag(tmp_path):
    run, traces = tmp_path / "run.trec", tmp_path / "traces.jsonl"
    writer = RunWriter(run, traces, tag="mine")
    writer.write(result("q1", ["b", "a"], windows=2))
    writer.write(result("q2", ["c"]))
    writer.close()
    writer.close()  # idempotent
    assert run.read_text().splitlines() == ["q1 Q0 b 1 2.0 mine", "q1 Q0 a 2 1.0 mine", "q2 Q0 c 1 1.0 mine"]
    assert [t.start for t in read_traces(traces)["q1"]] == [0, 2] and writer.done == {"q1", "q2"}


def test_writer_starts_afresh_unless_resuming(tmp_path):
    run, traces = tmp_path / "run.trec", tmp_path / "traces.jsonl"
    run.write_text(run_line("old", "d", 1, 1.0) + "\n")
    traces.write_text(json.dumps(trace_record(trace("old"))) + "\n")
    kept = RunWriter(run, traces, resume=True)
    assert kept.done == {"old"}
    kept.write(result("new", ["d"]))
    kept.close()
    assert [line.split()[0] for line in run.read_text().splitlines()] == ["old", "new"]
    fresh = RunWriter(run, traces)
    assert fresh.done == set()
    fresh.close()
    assert run.read_text() == "" and traces.read_text() == ""


def test_writer_refuses_gzip_and_names_an_unwritable_place(tmp_path):
    with pytest.raises(RearankError, match=r"run.trec.gz: incremental output cannot be gzip"):
        RunWriter(tmp_path / "run.trec.gz")
    with pytest.raises(RearankError, match=r"traces.jsonl.gz: incremental output cannot be gzip"):
        RunWriter(tmp_path / "run.trec", tmp_path / "traces.jsonl.gz")
    blocker = tmp_path / "file"
    blocker.write_text("")
    existing = tmp_path / "run.trec"
    existing.write_text("kept\n")
    with pytest.raises(RearankError, match=rf"^{blocker / 'traces.jsonl'}: cannot write output"):
        RunWriter(existing, blocker / "traces.jsonl")
    assert existing.read_text() == "kept\n"  # checked before anything was emptied


def test_a_failed_write_names_the_file_and_keeps_earlier_queries(tmp_path):
    writer = RunWriter(tmp_path / "run.trec", "/dev/full")
    with pytest.raises(RearankError, match=r"^/dev/full: cannot write output \(No space left on device\)"):
        writer.write(result("q1", ["a"]))
    writer.close()
    assert writer.done == set()
    writer = RunWriter("/dev/full")
    with pytest.raises(RearankError, match=r"^/dev/full: cannot write output .*--resume"):
        writer.write(result("q1", ["a"]))
    writer.close()


def test_recover_without_a_run_keeps_nothing(tmp_path):
    assert recover(tmp_path / "none.trec", tmp_path / "none.jsonl", {"q": 1}) == set()


def test_recover_keeps_whole_well_formed_queries(tmp_path, caplog):
    run = tmp_path / "run.trec"
    lines = [run_line("a", "d1", 1, 2.0), run_line("a", "d2", 2, 1.0),  # complete
             run_line("b", "d1", 1, 2.0),  # one line short of the 2 expected
             run_line("c", "d1", 1, 1.0) + " extra",  # 7 columns
             run_line("d", "d1", "x", 1.0),  # rank not a number
             run_line("e", "d1", 1, "high"),  # score not a number
             run_line("f", "d1", 1, 1.0),  # not in expected: any count is whole
             run_line("g", "d1", 1, 1.0)]  # the last line, cut short (no newline)
    run.write_text("\n".join(lines))
    with caplog.at_level(logging.WARNING, logger="rearank.run.files"):
        done = recover(run, None, {"a": 2, "b": 2, "c": 1, "d": 1, "e": 1, "g": 1})
    assert done == {"a", "f"}
    assert run.read_text().splitlines() == [*lines[:2], lines[6]]
    assert "5 incomplete queries dropped" in caplog.text and "b, c, d, e, g" in caplog.text


def test_recover_leaves_a_complete_run_untouched(tmp_path):
    run = tmp_path / "run.trec"
    text = run_line("a", "d1", 1, 1.0) + "\n\n" + run_line("b", "d1", 1, 1.0) + "\n"
    run.write_text(text)
    before = run.stat().st_mtime_ns
    assert recover(run, None, {"a": 1, "b": 1}) == {"a", "b"}
    assert run.read_text() == text and run.stat().st_mtime_ns == before


def test_recover_drops_queries_whose_traces_are_short_and_lines_that_are_no_trace(tmp_path):
    run, traces = tmp_path / "run.trec", tmp_path / "traces.jsonl"
    run.write_text("".join(run_line(q, "d1", 1, 1.0) + "\n" for q in ("a", "b", "c")))
    records = [trace("a"), trace("a", 2), trace("b"), trace("c"), trace("c", 2)]
    traces.write_text("".join(json.dumps(trace_record(t)) + "\n" for t in records) + '{"qid": "c", "sta')
    done = recover(run, traces, {"a": 1, "b": 1, "c": 1}, expected_traces={"a": 2, "b": 2, "c": 2})
    assert done == {"a", "c"}
    assert [line.split()[0] for line in run.read_text().splitlines()] == ["a", "c"]
    assert [json.loads(line)["qid"] for line in traces.read_text().splitlines()] == ["a", "a", "c", "c"]


def test_recover_without_expected_traces_keeps_the_traces_of_kept_queries(tmp_path):
    run, traces = tmp_path / "run.trec", tmp_path / "traces.jsonl"
    run.write_text(run_line("a", "d1", 1, 1.0) + "\n" + run_line("b", "d1", 1, 1.0))  # b cut short
    traces.write_text("".join(json.dumps(trace_record(trace(q))) + "\n" for q in ("a", "b")))
    assert recover(run, traces, {"a": 1, "b": 1}) == {"a"}
    assert [json.loads(line)["qid"] for line in traces.read_text().splitlines()] == ["a"]
    unchanged = traces.read_text()
    before = traces.stat().st_mtime_ns
    assert recover(run, traces, {"a": 1}) == {"a"}
    assert traces.read_text() == unchanged and traces.stat().st_mtime_ns == before


def test_bytes_that_are_not_utf8_do_not_stop_a_resume(tmp_path):
    run, traces = tmp_path / "run.trec", tmp_path / "traces.jsonl"
    run.write_bytes(b"a Q0 d\xff 1 1.0 t\n")
    record = json.dumps(trace_record(trace("a"))).encode().replace(b"[2] > [1]", b"[2] \xff [1]")
    traces.write_bytes(record + b"\n\n" + json.dumps(trace_record(trace("a", 2))).encode() + b"\n")
    assert [t.start for t in read_traces(traces)["a"]] == [0, 2]  # past the blank line, the bad byte replaced
    assert recover(run, traces, {"a": 1}, expected_traces={"a": 2}) == {"a"}


def test_recover_drops_a_cut_last_query_after_a_blank_line(tmp_path):
    run = tmp_path / "run.trec"
    run.write_text(run_line("a", "d1", 1, 1.0) + "\n\n" + "b Q0 d1 1 1.")
    assert recover(run, None, {"a": 1, "b": 1}) == {"a"}
    assert run.read_text() == run_line("a", "d1", 1, 1.0) + "\n"


def test_recover_counts_traces_only_for_the_queries_it_expects_them_of(tmp_path):
    run, traces = tmp_path / "run.trec", tmp_path / "traces.jsonl"
    run.write_text(run_line("a", "d1", 1, 1.0) + "\n" + run_line("b", "d1", 1, 1.0) + "\n")
    traces.write_text(json.dumps(trace_record(trace("a"))) + "\n")
    assert recover(run, traces, {}, expected_traces={"b": 0}) == {"a", "b"}


def test_recover_names_the_file_and_the_first_ten_dropped_queries(tmp_path, caplog):
    run = tmp_path / "run.trec"
    run.write_text("".join(run_line(f"q{i:02d}", "d1", 1, 1.0) + "\n" for i in range(12)))
    with caplog.at_level(logging.WARNING, logger="rearank.run.files"):
        assert recover(run, None, dict.fromkeys((f"q{i:02d}" for i in range(12)), 2)) == set()
    listed = ", ".join(f"q{i:02d}" for i in range(10))
    assert f"{run}: 12 incomplete queries dropped, they will be reranked: {listed}\n" in caplog.text + "\n"


def test_writer_defaults_folders_and_non_ascii_traces(tmp_path):
    run, traces = tmp_path / "a" / "b" / "run.trec", tmp_path / "c" / "traces.jsonl"
    writer = RunWriter(run, traces)
    writer.write(Result(Query("q", "t"), (Candidate("d", 0.0, ""),), (trace("q", raw_output="[1] ist gut, ça va"),)))
    writer.close()
    assert run.read_text() == "q Q0 d 1 1.0 rearank\n"
    assert "ist gut, ça va" in traces.read_text(encoding="utf-8")


def test_a_failed_write_says_what_to_do(tmp_path):
    writer = RunWriter("/dev/full")
    with pytest.raises(RearankError) as err:
        writer.write(result("q1", ["a"]))
    writer.close()
    assert str(err.value) == ("/dev/full: cannot write output (No space left on device); the finished queries are "
                              "kept, free space and rerun with --resume")


def test_non_ascii_queries_and_traces_are_written_and_resumed_whatever_the_locale(tmp_path, ascii_locale):
    run, traces = tmp_path / "run.trec", tmp_path / "traces.jsonl"
    writer = RunWriter(run, traces)
    writer.write(Result(Query("q-é", "t"), (Candidate("doc-ü", 0.0, ""),), (trace("q-é", raw_output="ça va"),)))
    writer.close()
    with open(run, "ab") as handle:  # a second query cut short: the resume rewrites both files without it
        handle.write(b"b Q0 d1 1 1.")
    with open(traces, "ab") as handle:
        handle.write(json.dumps(trace_record(trace("b"))).encode() + b"\n")
    assert recover(run, traces, {"q-é": 1, "b": 1}, expected_traces={"q-é": 1, "b": 1}) == {"q-é"}
    assert run.read_bytes() == "q-é Q0 doc-ü 1 1.0 rearank\n".encode()
    kept = json.dumps(trace_record(trace("q-é", raw_output="ça va")), ensure_ascii=False) + "\n"
    assert traces.read_bytes() == kept.encode()
