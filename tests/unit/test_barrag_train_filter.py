"""The BAR-RAG training filter (``rearank.rag.barrag.train_filter``) against a fake selector and reader: the
settings each call carries, the accuracies of valid, out-of-range and unparseable selections, the log and stats
of an interrupted run and its resumption, the bound on questions in flight, the progress bar and the refusals."""

from __future__ import annotations

import asyncio
import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tqdm

from rearank.errors import FormatError, RearankError
from rearank.methods.barrag.prompt import generator_messages
from rearank.methods.barrag.reader import ReaderError
from rearank.rag.barrag import train_filter
from rearank.rag.barrag.train_filter import LOG, FilterSettings, question_accuracies, run_filter
from rearank.types import Passage
from tests.unit import test_engine_generate_edges as edges
from tests.unit.test_barrag_reward_edges import (  # noqa: F401 (_fresh_truth_cache: autouse fixture)
    CITES_1_3,
    DOCS,
    NAME,
    ONE_CITE,
    TRUTH,
    TWO_CITES,
    _fresh_truth_cache,
)

SEL, READ = "http://sel.test:1/v1", "http://read.test:2/v1"
WRONG = "<answer>nobody</answer>"  # F1 0, EM 0, no citation: score 0
#: Each question's selector samples: docs 1 and 2; doc 1 (9 is out of range of 6); no answer block (invalid).
PICKS = ["<think>x</think><answer>[1], [2]</answer>", "<answer>[1], [9]</answer>", "I pick none"]
#: Reader answers by the documents shown: 1 and 2 -> scores 1.0, 0.9, 0; doc 1 alone -> 0.9 (1 of its 2 citations
#: counts; 1.0 if Doc [3] counted) three times.
ANSWERS = {(1, 2): [TWO_CITES, ONE_CITE, WRONG], (1,): [CITES_1_3] * 3}
#: tau 0.95: [1/3, 0, 0] (mean 1/9, variance 6/243: "mean"); tau 0.8: [2/3, 1, 0] (mean 5/9, variance 14/81: kept).
SETTINGS = FilterSettings(SEL, "sel-model", READ, "read-model", selector_samples=3, reader_samples=3,
                          selector_temperature=0.9, reader_temperature=0.6, tau=0.95, selector_max_tokens=111,
                          reader_max_tokens=222, questions_in_flight=2, timeout_s=33.0, retries=1)


def passages(ids):
    return [Passage(str(i), DOCS[i - 1]["title"], DOCS[i - 1]["text"]) for i in ids]


class Servers:
    """The selector and the reader: each call recorded; the selector fails for the prompts in ``failing``."""

    def __init__(self, failing=()):
        self.failing, self.calls, self.in_flight, self.peak = set(failing), [], 0, 0

    async def __call__(self, url, model, messages, n, **kwargs):
        self.calls.append({"url": url, "model": model, "messages": messages, "n": n, **kwargs})
        if url == SEL + "/chat/completions":
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(0)
            self.in_flight -= 1
            if messages[-1]["content"] in self.failing:
                raise ReaderError("down")
            return PICKS
        shown = next(ids for ids in ANSWERS if generator_messages("Who?", passages(ids)) == messages)
        return ANSWERS[shown]

    def asked(self):
        return [c["messages"][-1]["content"] for c in self.calls if c["url"] == SEL + "/chat/completions"]


@pytest.fixture
def servers(monkeypatch):
    fake = Servers()
    monkeypatch.setattr(train_filter, "sample_reader", fake)
    return fake


def row(qid, truth=TRUTH):
    return {"prompt": [{"role": "user", "content": qid}], "reward_model": {"ground_truth": json.dumps(truth)},
            "extra_info": {"qid": qid}}


def data(folder, qids, val=True):
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist([row(q) for q in qids]), folder / "train.parquet")
    if val:
        (folder / "val.parquet").write_bytes(b"any val bytes")
    return folder


def stats(questions, judged, failed, reasons, **end):
    return {"questions": questions, "judged": judged, "failed_this_run": failed, "reasons": reasons,
            "rules": {"selector_samples": 3, "reader_samples": 3, "reader_temperature": 0.6, "tau": 0.95,
                      "mean_range": [0.25, 0.85], "min_variance": 0.02}, **end}


def test_each_selection_is_read_with_the_settings_given(servers):
    assert asyncio.run(question_accuracies(row("q1"), SETTINGS)) == [1 / 3, 0.0, 0.0]
    options = {"temperature": 0.6, "max_tokens": 222, "timeout_s": 33.0, "max_retries": 1}
    assert servers.calls == [
        {"url": SEL + "/chat/completions", "model": "sel-model", "messages": [{"role": "user", "content": "q1"}],
         "n": 3, "temperature": 0.9, "max_tokens": 111, "timeout_s": 33.0, "max_retries": 1},
        {"url": READ + "/chat/completions", "model": "read-model", "messages": generator_messages("Who?", passages([1, 2])),
         "n": 3, **options},
        {"url": READ + "/chat/completions", "model": "read-model", "messages": generator_messages("Who?", passages([1])),
         "n": 3, **options},
    ]  # the unparseable selection costs no reader call


def test_the_default_settings_are_the_released_ones(servers):
    default = FilterSettings(SEL, "s", READ, "r")
    assert asyncio.run(question_accuracies(row("q1"), default)) == [2 / 3, 1.0, 0.0]  # tau 0.8
    common = {"max_tokens": 1024, "timeout_s": 300.0, "max_retries": 3}
    assert [{k: c[k] for k in ("n", "temperature", *common)} for c in servers.calls] == [
        {"n": 8, "temperature": 1.0, **common}, {"n": 10, "temperature": 0.7, **common},
        {"n": 10, "temperature": 0.7, **common}]


def test_a_row_without_selector_ground_truth_is_named(servers):
    with pytest.raises(RearankError, match=r"^question q7: malformed ground truth \(not a barrag-selector row\)$"):
        asyncio.run(question_accuracies(row("q7", {"answers": [NAME]}), SETTINGS))
    assert servers.calls == []


def test_a_failed_run_logs_what_it_judged_and_the_next_run_finishes(servers, tmp_path):
    source = data(tmp_path / "sel", ["q1", "q2", "q3"])
    out = tmp_path / "out" / "filtered"  # parents made
    servers.failing = {"q2", "q3"}
    assert run_filter(source, out, SETTINGS, progress=False) == stats(3, 1, 2, {"mean": 1}, complete=False)
    first = {"qid": "q1", "accuracies": [1 / 3, 0.0, 0.0], "mean": 0.111111, "variance": 0.024691, "keep": False,
             "reason": "mean"}
    assert [json.loads(line) for line in (out / LOG).read_text().splitlines()] == [first]
    assert sorted(p.name for p in out.iterdir()) == [LOG]

    servers.failing, servers.calls = set(), []
    kept = FilterSettings(**{**vars(SETTINGS), "tau": 0.8})  # q2 and q3: [2/3, 1, 0]
    expected = {**stats(3, 3, 0, {"mean": 1, "kept": 2}, complete=True, kept=2), "rules": {
        **stats(0, 0, 0, {})["rules"], "tau": 0.8}}
    assert run_filter(source, out, kept, progress=False) == expected
    assert servers.asked() == ["q2", "q3"]
    again = {"accuracies": [2 / 3, 1.0, 0.0], "mean": 0.555556, "variance": 0.17284, "keep": True, "reason": "kept"}
    log = [json.loads(line) for line in (out / LOG).read_text().splitlines()]
    assert log[0] == first and sorted(log[1:], key=lambda r: r["qid"]) == [{"qid": q, **again} for q in ("q2", "q3")]
    assert [r["extra_info"]["qid"] for r in pq.read_table(out / "train.parquet").to_pylist()] == ["q2", "q3"]
    assert (out / "val.parquet").read_bytes() == b"any val bytes"
    assert (out / "filter_stats.json").read_text() == json.dumps(expected, indent=1) + "\n"


def test_a_judged_run_asks_nothing_again(servers, tmp_path):
    source, out = data(tmp_path / "sel", ["q1", "q2"], val=False), tmp_path / "out"
    out.mkdir()  # an existing output folder is used
    run_filter(source, out, SETTINGS, progress=False)
    servers.calls = []
    assert run_filter(source, out, SETTINGS, progress=False) == stats(2, 2, 0, {"mean": 2}, complete=True, kept=0)
    assert servers.calls == [] and pq.read_table(out / "train.parquet").num_rows == 0
    assert sorted(p.name for p in out.iterdir()) == [LOG, "filter_stats.json", "train.parquet"]  # no val to copy


def test_an_empty_training_file_is_written_back_empty(servers, tmp_path):
    source, out = tmp_path / "sel", tmp_path / "out"
    source.mkdir()
    pq.write_table(pa.Table.from_pylist([row("q1")]).slice(0, 0), source / "train.parquet")
    assert run_filter(source, out, SETTINGS, progress=False) == stats(0, 0, 0, {}, complete=True, kept=0)
    assert pq.read_table(out / "train.parquet").schema == pq.read_table(source / "train.parquet").schema


def test_at_most_questions_in_flight_questions_are_judged_at_once(servers, tmp_path):
    source = data(tmp_path / "sel", [f"q{i}" for i in range(10)])
    run_filter(source, tmp_path / "out", FilterSettings(SEL, "s", READ, "r"), progress=False)
    assert servers.peak == 8


def test_the_progress_bar_counts_judged_and_failed_questions(servers, tmp_path, monkeypatch):
    edges.BARS.clear()
    monkeypatch.setattr(tqdm, "tqdm", edges.Bar)  # a real bar's monitor thread stalls the forks of a mutation run
    servers.failing = {"q2"}
    source = data(tmp_path / "sel", ["q1", "q2"])
    run_filter(source, tmp_path / "out", SETTINGS)
    servers.failing = set()
    run_filter(source, tmp_path / "out", SETTINGS, progress=False)
    shown, quiet = edges.BARS
    assert shown.kwargs == {"total": 2, "desc": "barrag filter", "unit": "question", "disable": False}
    assert quiet.kwargs == {"total": 1, "desc": "barrag filter", "unit": "question", "disable": True}
    assert shown.updates == [1, 1] and quiet.updates == [1]


def test_the_input_must_hold_train_parquet_and_differ_from_the_output(servers, tmp_path):
    source = tmp_path / "sel"
    with pytest.raises(RearankError, match=re.escape(
            f"{source / 'train.parquet'} not found; make it with `rearank synth --method barrag-selector --qa FILE "
            f"--output-dir {source}`")):
        run_filter(source, tmp_path / "out", SETTINGS)
    data(source, ["q1"])
    (tmp_path / "link").symlink_to(source)
    with pytest.raises(RearankError, match=r"^--output-dir must differ from the input folder \(the input parquet is "
                                           r"never overwritten\)$"):
        run_filter(source, tmp_path / "link", SETTINGS)
    assert servers.calls == [] and sorted(p.name for p in source.iterdir()) == ["train.parquet", "val.parquet"]


@pytest.mark.parametrize("key", ["qid", "keep", "reason"])
def test_a_log_of_another_shape_is_refused(servers, tmp_path, key):
    out = tmp_path / "out"
    out.mkdir()
    record = {"qid": "q1", "keep": True, "reason": "kept"}
    del record[key]
    (out / LOG).write_text(json.dumps(record) + '\n{"qid": "q2", "keep": false, "reason": "mean"}\n')
    with pytest.raises(FormatError, match=re.escape(f"{out / LOG}:1: not a filter log record ('{key}'); remove the "
                                                    "file to start over")):
        run_filter(data(tmp_path / "sel", ["q1"]), out, SETTINGS)
