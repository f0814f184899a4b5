"""rag evaluation edges: whole records, the answer style, failed reads, the judge's input, the progress bar, the
files' exact text, refusals' messages, a measure with no rows, and the paired comparison's table."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest

from rearank.errors import FormatError, RearankError
from rearank.measures.significance import randomization_p
from rearank.methods.arena.reading import MEASURES as ARENA_MEASURES
from rearank.methods.arena.reading import score_arena
from rearank.methods.arena.reward import STYLE as ARENA
from rearank.methods.card import Published, PublishedRow, Reading
from rearank.rag.evaluate import (
    MEASURES,
    RagEvaluation,
    aggregate,
    compare_runs,
    item_record,
    markdown_table,
    published_rows,
    read_records,
    reading_record,
    score_answer,
)
from rearank.rag.readers import ReaderOutput
from rearank.rag.selectors import make_selector
from rearank.types import Passage, QAItem
from tests.unit.test_engine_generate_edges import BARS, Bar
from tests.unit.test_rag_evaluate import ITEMS, FailingReader, item

PASSAGES = (Passage("0", "T0", "born in new york"), Passage("1", "T1", "elsewhere"))
#: Gold "new york", answered "new_york": right under ARENA's normalisation ("_" as a space), wrong under SQuAD's.
CITY = QAItem("q0", "Where?", ("new york",), PASSAGES, frozenset({"0"}), "hotpotqa")
UNDERSCORED = ReaderOutput("<answer>new_york</answer>", "new_york")


class ListReader:
    """Gives its outputs in order, one per context."""

    name = "list"

    def __init__(self, *outputs: ReaderOutput) -> None:
        self.outputs = list(outputs)

    def read(self, batch):
        return [self.outputs.pop(0) for _ in batch]


class RecordingJudge:
    """Says 1.0 to every pair; records the (gold answers, judged text) pairs."""

    def __init__(self) -> None:
        self.pairs: list = []

    def judge(self, pairs):
        self.pairs += pairs
        return [1.0] * len(pairs)


def test_a_whole_record_scored_in_the_runs_style_with_its_failed_read(tmp_path):
    other = QAItem("q1", "Who?", ("Ann",), PASSAGES, frozenset({"1"}), "musique")
    reader = ListReader(ReaderOutput(UNDERSCORED.response, UNDERSCORED.answer, failed=True), ReaderOutput("x", "Bob"))
    metrics = RagEvaluation(tmp_path / "o", {}).run([CITY, other], make_selector("none"), reader, [1],
                                                    style=ARENA, progress=False)
    first, second = (json.loads(x) for x in (tmp_path / "o" / "items.jsonl").read_text().splitlines())
    assert first == {"qid": "q0", "source": "hotpotqa", "question": "Where?", "answers": ["new york"],
                     "supporting": ["0"], "ranking": ["0", "1"],
                     "k": {"1": {"passages": ["0"], "response": "<answer>new_york</answer>", "answer": "new_york",
                                 "em": 1.0, "f1": 1.0, "hit": 1.0, "answer_recall": 1.0, "support_recall": 1.0,
                                 "support_all": 1.0, "reader_failed": True}}}
    assert "reader_failed" not in second["k"]["1"]
    assert metrics["k"]["1"]["reader_failed"] == 1 and metrics["k"]["1"]["em"] == 0.5


def test_the_default_style_is_squads():
    assert score_answer(UNDERSCORED, ["new york"]) == {"em": 0.0, "f1": 0.0, "hit": 0.0}
    assert item_record(CITY, PASSAGES, [1], {1: UNDERSCORED})["k"]["1"]["em"] == 0.0


def test_a_reading_record_is_scored_in_its_cards_style_and_marks_a_failed_read():
    reader = SimpleNamespace(name="fake", reading=Reading(lambda item: 1, score_arena, ARENA_MEASURES, "squad"))
    response = "<relevance>[1]</relevance><analysis>x</analysis><answer>new_york</answer>"
    record = reading_record(reader, CITY, PASSAGES, ReaderOutput(response, "", failed=True))
    assert record["k"] == {"fake": {"shown": ["0"], "response": response, "answer": "new_york", "pids": ["0"],
                                    "em": 0.0, "f1": 0.0, "hit": 0.0, "format_ok": 1.0, "relevance_exact": 1.0,
                                    "relevance_overlap": 1.0, "relevance_precision": 1.0, "relevance_recall": 1.0,
                                    "reader_failed": True}}
    assert "reader_failed" not in reading_record(reader, CITY, PASSAGES, ReaderOutput(response, ""))["k"]["fake"]


def test_a_key_without_rows_averages_to_zero():
    row = {**dict.fromkeys(MEASURES, 1.0), "reader_failed": True}
    out = aggregate([{"k": {"1": row}}], [1, 2])
    assert out["k"]["1"] == {**dict.fromkeys(MEASURES, 1.0), "reader_failed": 1}
    assert out["k"]["2"] == {**dict.fromkeys(MEASURES, 0.0), "reader_failed": 0}


def test_the_judge_reads_the_answer_or_else_the_response(tmp_path):
    judge = RecordingJudge()
    reader = ListReader(ReaderOutput("<answer>Ann</answer>", "Ann"), ReaderOutput("no tags here", ""))
    RagEvaluation(tmp_path / "o", {}).run(ITEMS[:2], make_selector("none"), reader, [1], progress=False, judge=judge)
    assert judge.pairs == [(["Ann"], "Ann"), (["Ann"], "no tags here")]


def test_a_reader_giving_too_few_answers_is_refused(tmp_path):
    reader = SimpleNamespace(name="short", read=lambda batch: [UNDERSCORED])
    with pytest.raises(RearankError, match=re.escape("reader 'short' gave 1 answers for 2 contexts")):
        RagEvaluation(tmp_path / "o", {}).run([CITY], make_selector("none"), reader, [1, 2], progress=False)


def test_questions_go_32_to_a_read_by_default(tmp_path):
    reader = FailingReader(0)
    RagEvaluation(tmp_path / "o", {}).run([item(i, {"0"}) for i in range(33)], make_selector("none"), reader, [1],
                                          progress=False)
    assert reader.calls == 2


def test_the_progress_bar_is_on_by_default_and_counts_the_resumed_questions(tmp_path, monkeypatch):
    BARS.clear()
    monkeypatch.setattr("rearank.rag.evaluate.tqdm", Bar)
    RagEvaluation(tmp_path / "o", {}).run(ITEMS[:1], make_selector("none"), FailingReader(0), [1], progress=False)
    RagEvaluation(tmp_path / "o", {}, resume=True).run(ITEMS, make_selector("none"), FailingReader(0), [1], chunk=1)
    off, on = BARS
    assert off.kwargs["disable"] is True
    assert on.kwargs == {"total": 3, "initial": 1, "unit": "question", "desc": "rag eval", "disable": False,
                           "dynamic_ncols": True}
    assert (on.updates, on.closed) == ([1, 1], True)


def test_config_metrics_and_table_files_are_exact(tmp_path):
    out = tmp_path / "o"
    metrics = RagEvaluation(out, {"label": "t"}).run(ITEMS[:1], make_selector("none"), FailingReader(0), [1],
                                                     progress=False)
    assert (out / "config.json").read_text() == '{\n  "label": "t"\n}\n'
    assert metrics["config"] == {"label": "t"}
    text = (out / "metrics.json").read_text()
    assert text.startswith('{\n  "questions": 1,\n  "k": {\n    "1": {\n      "em": 0.0,\n')
    assert text.endswith('\n  "config": {\n    "label": "t"\n  }\n}\n') and json.loads(text) == metrics
    table, notes = (out / "table.md").read_text().split("\n\n")
    assert table.endswith(" |") and notes.startswith("Published rows: ") and notes.endswith("an LLM reader.\n")


def test_refusals_name_the_folder_and_every_changed_setting(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(RearankError, match=re.escape(f"--output-dir {tmp_path / 'f'} is a file; give a folder")):
        RagEvaluation(tmp_path / "f", {})
    RagEvaluation(tmp_path / "o", {"a": 1})
    with pytest.raises(RearankError, match=re.escape(
            f"{tmp_path / 'o'} was made with other settings (a, b); use a new --output-dir or the same settings")):
        RagEvaluation(tmp_path / "o", {"a": 2, "b": 1}, resume=True)
    with pytest.raises(RearankError, match=re.escape("other settings (c)")):
        RagEvaluation(tmp_path / "o", {"a": 1, "c": 0}, resume=True)


def test_the_default_label_is_ours():
    table = markdown_table({"questions": 1, "k": {"3": dict.fromkeys(MEASURES, 0.5)}}, {}, ["hotpotqa"])
    assert "| ours (ours, on this sample, n=1) | 3 | 50.00 |" in table


def test_a_published_row_without_k_leaves_the_k_cell_blank():
    published = Published("P", ("em",), (PublishedRow("sys", None, None, (10.0,)),), label="{system}")
    assert published_rows(published, ("em", "f1"), ["hotpotqa"], k_column=True) == ["| sys | | 10.00 | |"]


def write_run(folder, rows, tail=""):
    folder.mkdir()
    (folder / "items.jsonl").write_text("".join(json.dumps({"qid": q, "k": k}) + "\n" for q, k in rows) + tail)


def test_read_records_drops_a_torn_or_shapeless_last_line_and_names_a_bad_middle_one(tmp_path):
    write_run(tmp_path / "a", [("q0", {})], tail='{"qid": "q1"}\n')
    assert list(read_records(tmp_path / "a" / "items.jsonl")) == ["q0"]
    write_run(tmp_path / "b", [("q0", {})], tail='{"k": {}}\n')
    assert list(read_records(tmp_path / "b" / "items.jsonl")) == ["q0"]
    write_run(tmp_path / "c", [("q0", {})], tail='{"qid": "q1"}\n{"qid": "q2", "k": {}}\n')
    with pytest.raises(FormatError, match=re.escape(":2: not a rag eval record ('k'); start a new --output-dir")):
        read_records(tmp_path / "c" / "items.jsonl")


def test_compare_pairs_only_the_questions_both_finished_at_k_and_leaves_the_files_as_they_are(tmp_path):
    # A: f1 0, 0, 0, 0; B: 0.5, 0.5, 0.5, 0 -> 0.00 vs 37.50; differences 0.5, 0.5, 0.5, 0: t = 0.375 / (0.25 / 2)
    # = 3 on 3 degrees of freedom, p = 1 - (2 / pi) * (pi / 3 + sqrt(3) / 4) = 0.0577; B wins 3, ties 1, loses 0
    zero, half = {"2": {"f1": 0.0}}, {"2": {"f1": 0.5}}
    write_run(tmp_path / "a", [("q0", zero), ("q1", zero), ("q2", zero), ("q3", zero), ("qa", zero), ("qk", zero)],
              tail='{"qid": "q9", "k": {')
    write_run(tmp_path / "b", [("q0", half), ("q1", half), ("q2", half), ("q3", zero), ("qb", half),
                               ("qk", {"5": {"f1": 0.5}})])
    before = (tmp_path / "a" / "items.jsonl").read_text()
    p = randomization_p(np.zeros(4), np.array([0.5, 0.5, 0.5, 0]))  # at its defaults: 10000 flips, seed 0
    assert 0.2 < p < 0.3  # a quarter of the sign flips reach |mean| 0.375
    assert compare_runs(tmp_path / "a", tmp_path / "b", 2, measures=("f1",)) == "\n".join([
        f"A = {tmp_path / 'a'}", f"B = {tmp_path / 'b'}", "k = 2, 4 paired questions", "",
        "| measure | A | B | delta (B-A) | t-test p | randomization p | B wins/ties/losses |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        f"| f1 | 0.00 | 37.50 | +37.50 | 0.0577 | {p:.4f} | 3/1/0 |"])
    assert (tmp_path / "a" / "items.jsonl").read_text() == before
    seeded = randomization_p(np.zeros(4), np.array([0.5, 0.5, 0.5, 0]), 200, 1)
    assert compare_runs(tmp_path / "a", tmp_path / "b", 2, ("f1",), 200, 1).endswith(f" | {seeded:.4f} | 3/1/0 |")
