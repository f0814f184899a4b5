"""No face writes over one of its inputs: every command and ``Reranker.rerank_run`` refuse an output that is an
input (the same file, another spelling of it, a symbolic or a hard link) with one line naming both, before writing.

The command cases come from the parsers themselves: every flag marked as an input (:func:`rearank.io.outputs.reads`)
of every command with an output flag, so a new input flag is tested as soon as it is marked, and a path flag left
unmarked fails :func:`test_every_path_flag_is_marked_as_an_input_or_an_output`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from benchmark import analyses
from benchmark import run as suite_run
from rearank.cli import build_parser, main
from rearank.errors import RearankError
from rearank.io.outputs import INPUT, OUTPUT, ROLE, flag_name
from tests.parsers import command_line, commands, shown

SPELLINGS = ("same", "relative", "dotted", "symlink", "hardlink")
#: Path-like flags that are neither read as an input nor written as an output of the command.
NEITHER = {("data", "list", "--data-dir"), ("data", "fetch", "--data-dir"), ("data", "path", "--data-dir")}
CONTENT = b"precious input\n"


def marked(parser: argparse.ArgumentParser, role: str) -> list[argparse.Action]:
    return [a for a in shown(parser) if getattr(a, ROLE, None) == role]


def cases():
    """Every input flag and every output flag of each command with outputs, met in pairs; the spellings take
    turns."""
    turn = 0
    for path, parser in commands(build_parser()):
        outputs = marked(parser, OUTPUT)
        if not outputs:
            continue
        inputs = marked(parser, INPUT)
        for i in range(max(len(inputs), len(outputs)) if inputs else 0):
            given, output = inputs[i % len(inputs)], outputs[i % len(outputs)]
            spelling = SPELLINGS[turn % len(SPELLINGS)]
            turn += 1
            yield pytest.param(path, flag_name(given), flag_name(output), spelling,
                               id=f"{' '.join(path)} {flag_name(given)}->{flag_name(output)} {spelling}")


def spell(target: Path, spelling: str, tmp: Path) -> str:
    """Another name of ``target``: itself, relative, through ``sub/..``, a symbolic link or a hard link."""
    if spelling == "relative":
        return target.name  # the test runs in tmp
    if spelling == "dotted":
        (tmp / "sub").mkdir()
        return str(tmp / "sub" / ".." / "." / target.name)
    if spelling == "symlink":
        (tmp / "link").symlink_to(target)
        return str(tmp / "link")
    if spelling == "hardlink":
        os.link(target, tmp / "hard")
        return str(tmp / "hard")
    return str(target)


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(("path", "in_flag", "out_flag", "spelling"), list(cases()))
def test_a_command_refuses_an_output_that_is_one_of_its_inputs(path, in_flag, out_flag, spelling, tmp_path,
                                                                 monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    parser = dict(commands(build_parser()))[path]
    by_name = {flag_name(a): a for a in shown(parser)}
    source = tmp_path / "input.txt"
    source.write_bytes(CONTENT)
    argv = command_line(path, parser, {by_name[in_flag]: str(source),
                                       by_name[out_flag]: spell(source, spelling, tmp_path)}, tmp_path)
    before = files_under(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{out_flag} " in err and f"is the input {in_flag};" in err, err
    assert files_under(tmp_path) == before  # nothing written, the input byte-identical


def test_every_spelling_and_output_flag_is_met():
    met = [c.values for c in cases()]
    assert {spelling for *_, spelling in met} == set(SPELLINGS)
    for path, parser in commands(build_parser()):
        if marked(parser, INPUT):
            assert {flag_name(a) for a in marked(parser, OUTPUT)} <= {out for p, _, out, _ in met if p == path}


def test_every_command_with_outputs_has_inputs_checked():
    """The walk above reaches the commands that write files (a parser refactor that hides them fails here)."""
    writers = {path for path, parser in commands(build_parser()) if marked(parser, OUTPUT)}
    assert {("rerank",), ("benchmark",), ("synth",), ("bm25",), ("view",), ("rag", "eval"), ("rag", "corpus"),
            ("rag", "export"), ("rag", "barrag", "filter")} <= writers
    assert {path for path, _ in cases_by_command()} >= writers - {("rag", "export")}  # export reads an id, no file


def cases_by_command():
    return {(c.values[0], c.values[1]) for c in cases()}


def looks_like_a_path(action: argparse.Action) -> bool:
    metavar = str(action.metavar or "")
    return action.type is Path or any(word in metavar for word in ("FILE", "DIR", "RUN", "CORPUS"))


def all_parsers():
    yield from commands(build_parser())
    yield from ((("python -m benchmark.analyses", *path), p) for path, p in commands(analyses.build_parser()))


@pytest.mark.parametrize(("path", "parser"), list(all_parsers()), ids=lambda v: " ".join(v) if isinstance(v, tuple)
                         else "")
def test_every_path_flag_is_marked_as_an_input_or_an_output(path, parser):
    unmarked = [flag_name(a) for a in shown(parser) if looks_like_a_path(a) and not getattr(a, ROLE, None)
                and (*path, flag_name(a)) not in NEITHER]
    assert not unmarked, f"{' '.join(path)}: mark {unmarked} with rearank.io.outputs.reads or writes"


def test_python_m_eval_run_refuses_its_input_as_output(tmp_path, capsys):
    first_stage = tmp_path / "bm25.trec"
    first_stage.write_bytes(CONTENT)
    code = suite_run.main(["--suite", "dl19", "--first-stage", str(first_stage), "--output-dir", str(first_stage)])
    err = capsys.readouterr().err
    assert code == 2 and "--output-dir" in err and "is the input --first-stage" in err
    assert first_stage.read_bytes() == CONTENT


# The Python face: every input argument of Reranker.rerank_run (and the oracle's own qrels file) as an output.
API_INPUTS = ("run", "topics", "docs", "qrels", "oracle qrels", "template")
API_OUTPUTS = ("output", "traces")


@pytest.fixture
def face_files(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    files = {"run": "q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 2 1.0 bm25\n", "topics": "q1\ta question\n",
             "docs": "d1\tone passage\nd2\tanother passage\n", "qrels": "q1 0 d1 1\n",
             "template": (Path(__file__).parents[2] / "rearank" / "methods" / "listwise" / "rearank.yaml").read_text()}
    paths = {}
    for name, text in files.items():
        paths[name] = tmp_path / f"{name}.in"
        paths[name].write_text(text)
    paths["oracle qrels"] = qrels
    return paths


@pytest.mark.parametrize("output", API_OUTPUTS)
@pytest.mark.parametrize("given", API_INPUTS)
def test_the_python_face_refuses_an_output_that_is_one_of_its_inputs(given, output, face_files, tmp_path):
    from rearank import Reranker

    before = files_under(tmp_path)
    options = {"template": str(face_files["template"])} if given == "template" else {}
    with Reranker(backend="oracle", qrels=face_files["oracle qrels"], **options) as rr:
        kwargs = {"run": face_files["run"], "topics": face_files["topics"], "docs": face_files["docs"],
                  "qrels": face_files["qrels"], "output": tmp_path / "out.trec"}
        kwargs[output] = tmp_path / "sub" / ".." / face_files[given].name
        (tmp_path / "sub").mkdir()
        with pytest.raises(RearankError) as err:
            rr.rerank_run(**kwargs, progress=False)
    name = {"oracle qrels": "the oracle's qrels"}.get(given, given)
    assert str(err.value).startswith(f"{output} {kwargs[output]} is the input {name};"), err.value
    assert files_under(tmp_path) == before


def test_the_python_face_keeps_the_qrels_file_byte_identical(face_files, tmp_path):
    """The reported bug: ``qrels=Q2, output=Q2`` wrote run lines over the qrels file."""
    from rearank import Reranker

    q2 = face_files["qrels"]
    before = q2.read_bytes()
    with Reranker(backend="oracle", qrels=face_files["oracle qrels"]) as rr, pytest.raises(RearankError):
        rr.rerank_run(run=face_files["run"], topics=face_files["topics"], docs=face_files["docs"], qrels=q2,
                      output=q2, progress=False)
    assert q2.read_bytes() == before
    assert not q2.with_name(q2.name + ".stats.json").exists()
