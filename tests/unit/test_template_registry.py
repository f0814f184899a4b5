"""The one registry of prompt templates: every builtin name resolves to its file and kind, a name of the other
kind is a one-line error listing the right names, an entry point adds a template, and ``--template`` takes a
path."""

from __future__ import annotations

import shutil
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from rearank import plugins
from rearank.cli import main
from rearank.errors import RearankError
from rearank.io.requests_jsonl import write_requests
from rearank.methods.groupwise.prompt import GROUPRANK_TEMPLATE, load_group_template
from rearank.prompts import load_template
from rearank.prompts.qa_files import load_prompt_file
from rearank.prompts.registry import RAG, RANKING, TEMPLATES, names
from rearank.rag.readers import answer_format
from rearank.types import Candidate, Query, Request

PLUGIN = Path(__file__).resolve().parents[1] / "fixtures" / "toy_plugin"
RANKING_NAMES = ["rearank", "rearank-answer", "rankgpt", "grouprank", "grouprank-answer", "grouprank-released",
                 "grouprank-released-answer"]
RAG_NAMES = ["plain", "rrpo", "barrag_selector", "barrag_generator", "barrag", "arena", "judge"]
LOADERS = {RANKING: load_template, RAG: load_prompt_file}


@pytest.fixture
def plugin_templates(monkeypatch):
    """The toy plugin's entry points installed, the registry read afresh (and restored after)."""
    points = [EntryPoint("toy-terse", "toy_plugin.templates:TERSE", "rearank.templates"),
              EntryPoint("toy-bad", "json:dumps", "rearank.templates")]
    monkeypatch.syspath_prepend(str(PLUGIN))
    monkeypatch.setattr(plugins, "entry_points", lambda group: [p for p in points if p.group == group])
    monkeypatch.setattr(TEMPLATES, "_loaders", None)
    monkeypatch.setattr(TEMPLATES, "_loaded", {})


def test_every_builtin_name_is_a_file_of_its_kind():
    assert names(RANKING) == RANKING_NAMES and names(RAG) == RAG_NAMES
    assert TEMPLATES["grouprank"].path == GROUPRANK_TEMPLATE
    assert TEMPLATES["barrag"].path == TEMPLATES["barrag_generator"].path
    for name in TEMPLATES:
        entry = TEMPLATES[name]
        assert entry.path.is_file(), name
        assert LOADERS[entry.kind](name).name  # the loader of its kind reads it


@pytest.mark.parametrize(("load", "name", "right"), [(load_template, "plain", RANKING_NAMES),
                                                      (load_group_template, "judge", RANKING_NAMES),
                                                      (load_prompt_file, "rankgpt", RAG_NAMES),
                                                      (answer_format, "grouprank", RAG_NAMES)])
def test_a_name_of_the_other_kind_is_one_line_listing_the_right_names(load, name, right):
    with pytest.raises(RearankError) as err:
        load(name)
    message = str(err.value)
    assert "\n" not in message and f"prompt template {name!r} is a " in message
    assert f"choose one of: {', '.join(right)}, or the path of a YAML file" in message


def test_a_rag_prompt_no_reader_reads_lists_the_reader_prompts():
    with pytest.raises(RearankError, match=r"^--template 'judge' is a judge prompt, not a reader's; choose one of: "
                       r"plain, rrpo, barrag_generator, barrag, arena, or the path"):
        answer_format("judge")
    assert answer_format("barrag") == answer_format("barrag_generator") == "barrag"


def test_an_unknown_name_lists_the_names_of_its_kind():
    with pytest.raises(RearankError, match=r"^prompt template 'nope': not a builtin RAG prompt file \(plain, rrpo, "):
        load_prompt_file("nope")


def test_an_entry_point_adds_a_template_whose_kind_is_read_from_its_file(plugin_templates):
    assert TEMPLATES["toy-terse"].kind == RANKING
    assert load_template("toy-terse").name == "toy-terse"
    with pytest.warns(UserWarning, match="'toy-bad' gave <function dumps"):  # left out of the lists, named
        assert names(RANKING) == [*RANKING_NAMES, "toy-terse"]
    with pytest.raises(RearankError, match="'toy-terse' is a ranking template, not a RAG prompt file"), \
            pytest.warns(UserWarning, match="'toy-bad'"):
        load_prompt_file("toy-terse")


def rerank(tmp_path: Path, *argv: str) -> int:
    docs = [Candidate(f"d{i}", 10.0 - i, f"passage {i} about fleas") for i in range(4)]
    write_requests(tmp_path / "req.jsonl", [Request(Query("q1", "how long do fleas live"), tuple(docs))])
    (tmp_path / "qrels.txt").write_text("q1 0 d2 3\nq1 0 d0 1\n")
    return main(["rerank", "--requests", str(tmp_path / "req.jsonl"), "--qrels", str(tmp_path / "qrels.txt"),
                 "--backend", "oracle", "--no-progress", "--output", str(tmp_path / "run.trec"), *argv])


def test_cli_template_takes_a_path_and_refuses_a_rag_name(tmp_path, capsys):
    mine = tmp_path / "mine.yaml"
    shutil.copy(TEMPLATES["rankgpt"].path, mine)
    assert rerank(tmp_path, "--template", str(mine)) == 0
    assert (tmp_path / "run.trec").read_text().split()[2] == "d2"
    capsys.readouterr()
    assert rerank(tmp_path, "--template", "plain") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'plain' is a RAG prompt file, not a ranking template" in err
