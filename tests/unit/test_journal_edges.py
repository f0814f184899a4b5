"""The round journal's edges: the header's settings compared both ways, its refusals word for word, a record
without its key, folders made on the way, the file as written and closed (what the engine tests leave open)."""

import json

import pytest

from rearank.backends.base import Generation
from rearank.engine.journal import Journal
from rearank.errors import FormatError, RearankError

CONFIG = {"window": 4, "step": 2}
ANSWER = Generation(text="[2] > [1] — fin", prompt_tokens=7, completion_tokens=3)
GOOD = json.dumps({"qid": "q", "index": 0, "text": "a", "prompt_tokens": 1, "completion_tokens": 1})


def write(path, *lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.mark.parametrize(("theirs", "changed"), [
    ({"window": 4}, "step"),  # a setting the journal lacks
    ({"window": 4, "step": 2, "seed": 1}, "seed"),  # a setting the run lacks
    ({"window": 5, "step": 3}, "step, window"),  # sorted, comma-separated
])
def test_a_setting_on_either_side_only_is_a_change(tmp_path, theirs, changed):
    path = tmp_path / "j.jsonl"
    write(path, json.dumps({"journal": 1, "config": theirs}))
    with pytest.raises(RearankError) as err:
        Journal(path, CONFIG, resume=True)
    assert str(err.value) == (f"{path} was written with other settings ({changed}); rerun with the same settings "
                              "to resume, or delete it to start over")


def test_a_header_without_settings_differs_in_every_setting(tmp_path):
    path = tmp_path / "j.jsonl"
    write(path, json.dumps({"journal": 1}))
    with pytest.raises(RearankError, match=r"other settings \(step, window\)"):
        Journal(path, CONFIG, resume=True)


@pytest.mark.parametrize("lines", [[], [GOOD], [json.dumps({"journal": 2, "config": CONFIG}), GOOD]],
                         ids=["empty", "no header", "another version"])
def test_a_file_that_is_no_journal_is_refused_at_line_1(tmp_path, lines):
    path = tmp_path / "j.jsonl"
    write(path, *lines)
    with pytest.raises(FormatError) as err:
        Journal(path, CONFIG, resume=True)
    assert str(err.value) == f"{path}:1: not a rearank round journal; delete it to start over"
    assert (err.value.path, err.value.line) == (str(path), 1)


@pytest.mark.parametrize(("record", "reason"), [
    ({"index": 0, "text": "a", "prompt_tokens": 1, "completion_tokens": 1}, "'qid'"),
    ({"qid": "q", "text": "a", "prompt_tokens": 1, "completion_tokens": 1}, "'index'"),
])
def test_a_record_without_its_key_is_named_with_the_fix(tmp_path, record, reason):
    path = tmp_path / "j.jsonl"
    write(path, json.dumps({"journal": 1, "config": CONFIG}), json.dumps(record), GOOD)
    with pytest.raises(FormatError) as err:
        Journal(path, CONFIG, resume=True)
    assert str(err.value) == (f"{path}:2: not a round journal record ({reason}); delete the journal to start over")


def test_add_keeps_the_generation_and_writes_one_utf8_line(tmp_path):
    path = tmp_path / "new" / "deeper" / "j.jsonl"  # folders made on the way
    journal = Journal(path, CONFIG)
    journal.add("q1", 3, ANSWER)
    assert journal.entries == {("q1", 3): ANSWER}
    journal.close()
    assert path.read_bytes().decode("utf-8").split("\n") == [
        '{"journal": 1, "config": {"window": 4, "step": 2}}',
        ('{"qid": "q1", "index": 3, "text": "[2] > [1] — fin", "prompt_tokens": 7, "completion_tokens": 3, '
         '"finish_reason": "stop", "latency_s": 0.0, "throttled": 0, "think_tokens": null, "think_budget_hit": false}'),
        ""]
    assert Journal(path, CONFIG, resume=True).entries == {("q1", 3): ANSWER}


def test_the_journal_is_utf8_whatever_the_locale(tmp_path, ascii_locale):
    path = tmp_path / "j.jsonl"
    journal = Journal(path, CONFIG)
    journal.add("q1", 3, ANSWER)
    journal.close()
    assert '"text": "[2] > [1] — fin"' in path.read_bytes().decode("utf-8")
    assert Journal(path, CONFIG, resume=True).entries == {("q1", 3): ANSWER}


def test_close_closes_the_file_and_remove_tolerates_a_file_already_gone(tmp_path):
    path = tmp_path / "j.jsonl"
    journal = Journal(path, CONFIG)
    journal.close()
    with pytest.raises(ValueError, match="closed file"):
        journal.add("q", 0, ANSWER)
    path.unlink()
    journal.close(remove=True)  # a second close, the file deleted by hand: nothing to do
    assert not path.exists()


def test_a_journal_that_cannot_be_written_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")  # the folder to hold the journal is a file
    path = tmp_path / "file" / "j.jsonl"
    with pytest.raises(RearankError) as err:
        Journal(path, CONFIG)
    assert str(err.value) == f"{path}: cannot write the round journal (File exists)"
