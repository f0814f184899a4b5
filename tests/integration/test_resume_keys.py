"""Every resume setting is guarded: a resume that changes any key of ``RESUME_KEYS`` (``rearank rerank`` and
``Reranker.rerank_run``) or of ``SUITE_RESUME_KEYS`` (``rearank benchmark``) is refused with a line naming it,
and the finished run is left as it was.

``CHANGES`` holds, for each key, how each face changes it (None: not a setting of that face). A key deleted from
the lists, or added to them without an entry here, fails :func:`test_every_resume_key_has_a_change_on_some_face`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rearank import Reranker
from rearank.cli import main
from rearank.errors import RearankError
from rearank.io.requests_jsonl import write_requests
from rearank.run.config import RESUME_KEYS, SUITE_RESUME_KEYS
from rearank.types import Candidate, Query, Request
from tests.conftest import require_pack

RUN = "q1 Q0 d1 1 3.0 bm25\nq1 Q0 d2 2 2.0 bm25\nq1 Q0 d3 3 1.0 bm25\nq2 Q0 d2 1 2.0 bm25\nq2 Q0 d3 2 1.0 bm25\n"
TOPICS = "q1\tfirst question\nq2\tsecond question\n"
DOCS = "d1\tpassage one\nd2\tpassage two\nd3\tpassage three\n"
QRELS = "q1 0 d3 2\nq1 0 d1 0\nq2 0 d3 1\n"
#: Another server the face may be pointed at (never called: the refusal comes first).
OPENAI = {"backend": "openai", "model": "served", "base_url": "http://127.0.0.1:9/v1"}
SERVED = {"--backend": "openai", "--model": "served", "-O": f"base_url={OPENAI['base_url']}"}

# key: (the rerank command line's change, the face's change: (Reranker keywords, rerank_run keywords),
#       the benchmark's change). In a change, a flag's value None drops the flag, True gives it without a value,
#       and "copy:NAME" is a copy of the input NAME under another path.
CHANGES: dict[str, tuple] = {
    "dataset": ({"--dataset": "dl19", "--run": None, "--topics": None, "--docs": None, "--qrels": None}, None, None),
    "run": ({"--run": "copy:run"}, ({}, {"run": "copy:run"}), None),
    "requests": ({"--requests": "requests", "--run": None, "--topics": None, "--docs": None}, None, None),
    "topics": ({"--topics": "copy:topics"}, ({}, {"topics": "copy:topics"}), None),
    "docs": ({"--docs": "copy:docs"}, ({}, {"docs": "copy:docs"}), None),
    "skip_missing": ({"--skip-missing": True}, ({}, {"skip_missing": True}), None),
    "tag": ({"--tag": "other"}, ({}, {"tag": "other"}), None),
    "backend": ({"--backend": "hf"}, (OPENAI, {}), {"--backend": "hf"}),
    "model": ({"--model": "embedded", "--backend": "hf"}, (OPENAI, {}), {"--model": "embedded", "--backend": "hf"}),
    # (the oracle takes no -O option: one is refused before the resume is looked at, so another backend's)
    "backend_options": (SERVED, (OPENAI, {}), SERVED),
    "method": ({"--method": "groupwise"}, ({"method": "groupwise"}, {}), {"--method": "groupwise"}),
    "template": ({"--template": "rankgpt"}, ({"template": "rankgpt"}, {}), {"--template": "rankgpt"}),
    "top_k": ({"--top-k": "2"}, ({"top_k": 2}, {}), {"--top-k": "2"}),
    "passage_budget": ({"--passage-budget": "30c"}, ({"passage_budget": "30c"}, {}), {"--passage-budget": "30c"}),
    "max_new_tokens": ({"--max-new-tokens": "100"}, ({"max_new_tokens": 100}, {}), {"--max-new-tokens": "100"}),
    "temperature": ({"--temperature": "0.5"}, ({"temperature": 0.5}, {}), {"--temperature": "0.5"}),
    "top_p": ({"--top-p": "0.9"}, ({"top_p": 0.9}, {}), {"--top-p": "0.9"}),
    "reasoning": ({"--reasoning": "off"}, ({"reasoning": False}, {}), {"--reasoning": "off"}),
    "seed": ({"--seed": "1"}, ({"seed": 1}, {}), {"--seed": "1"}),
    "max_queries": (None, None, {"--max-queries": "2"}),  # a run may resume with more queries; a suite may not
    "first_stage": (None, None, {"--first-stage": "copy:first_stage"}),
}
KEYS = sorted({*RESUME_KEYS, *SUITE_RESUME_KEYS, *CHANGES})


def test_every_resume_key_has_a_change_on_some_face():
    assert list(dict.fromkeys(KEYS)) == sorted(CHANGES), "each key of RESUME_KEYS and SUITE_RESUME_KEYS needs a " \
        "row in CHANGES (and a row whose key left the lists must go)"
    assert set(CHANGES) == {*RESUME_KEYS, *SUITE_RESUME_KEYS}
    assert all(any(change is not None for change in CHANGES[key]) for key in CHANGES)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The inputs, their copies under other names, and a request JSONL of the same queries."""
    folder = tmp_path_factory.mktemp("inputs")
    files = {"run": RUN, "topics": TOPICS, "docs": DOCS, "qrels": QRELS}
    paths = {}
    for name, text in files.items():
        paths[name] = folder / f"{name}.txt"
        paths[name].write_text(text)
        paths[f"copy:{name}"] = folder / "copies" / f"{name}.txt"
        paths[f"copy:{name}"].parent.mkdir(exist_ok=True)
        paths[f"copy:{name}"].write_text(text)
    texts = dict(line.split("\t") for line in DOCS.splitlines())
    paths["requests"] = folder / "requests.jsonl"
    write_requests(paths["requests"], [Request(Query("q1", "first question"),
                                               tuple(Candidate(d, 3.0 - i, texts[d]) for i, d in enumerate(["d1", "d2", "d3"])))])
    return paths


def flags(base: dict[str, object], change: dict[str, object], paths: dict[str, Path]) -> list[str]:
    argv: list[str] = []
    for flag, value in {**base, **change}.items():
        if value is None:
            continue
        argv += [flag] if value is True else [flag, str(paths.get(str(value), value))]
    return argv


def refusal_names(text: str, key: str) -> bool:
    return any(f"{sep}{key}: " in text for sep in ("(", ", ", "; "))


def finished_copy(source: Path, tmp: Path) -> Path:
    """A copy of the finished run ``source`` (with its traces and stats) in ``tmp``."""
    for path in source.parent.glob(source.name + "*"):
        shutil.copy(path, tmp / path.name)
    return tmp / source.name


def outputs_of(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.parent.iterdir()) if p.is_file()}


# --- rearank rerank --------------------------------------------------------------------------------------------

def rerank_base(paths):
    return {"--run": paths["run"], "--topics": paths["topics"], "--docs": paths["docs"], "--qrels": paths["qrels"],
            "--backend": "oracle", "--no-progress": True}


@pytest.fixture(scope="module")
def cli_run(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "run.trec"
    assert main(["rerank", *flags(rerank_base(inputs), {}, inputs), "--output", str(out)]) == 0
    return out


@pytest.mark.parametrize("key", [k for k in KEYS if CHANGES.get(k, (0,))[0] is not None])
def test_the_command_line_refuses_a_resume_that_changes(key, inputs, cli_run, tmp_path, capsys):
    out = finished_copy(cli_run, tmp_path)
    assert main(["rerank", *flags(rerank_base(inputs), {}, inputs), "--output", str(out), "--resume"]) == 0
    capsys.readouterr()
    before = outputs_of(out)
    code = main(["rerank", *flags(rerank_base(inputs), CHANGES[key][0], inputs), "--output", str(out), "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and "was made with other settings" in err and refusal_names(err, key), err
    assert outputs_of(out) == before


# --- Reranker.rerank_run ---------------------------------------------------------------------------------------

def face_run(paths, out: Path, built: dict, given: dict, resume: bool) -> None:
    options = {"backend": "oracle", **built}
    if options["backend"] == "oracle":
        options["qrels"] = paths["qrels"]
    kwargs = {"run": paths["run"], "topics": paths["topics"], "docs": paths["docs"], **given}
    kwargs = {k: paths.get(v, v) if isinstance(v, str) else v for k, v in kwargs.items()}
    with Reranker(**options) as rr:
        rr.rerank_run(**kwargs, output=out, resume=resume, progress=False)


@pytest.fixture(scope="module")
def face_output(inputs, tmp_path_factory):
    out = tmp_path_factory.mktemp("face") / "run.trec"
    face_run(inputs, out, {}, {}, resume=False)
    return out


@pytest.mark.parametrize("key", [k for k in KEYS if CHANGES.get(k, (0, 0))[1] is not None])
def test_the_python_face_refuses_a_resume_that_changes(key, inputs, face_output, tmp_path):
    out = finished_copy(face_output, tmp_path)
    face_run(inputs, out, {}, {}, resume=True)  # the same settings resume
    before = outputs_of(out)
    built, given = CHANGES[key][1]
    with pytest.raises(RearankError) as err:
        face_run(inputs, out, built, given, resume=True)
    assert "was made with other settings" in str(err.value) and refusal_names(str(err.value), key), err.value
    assert outputs_of(out) == before


# --- rearank benchmark -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def suite(inputs, tmp_path_factory):
    """A finished one-query dl19 suite (oracle), and a copy of the pack's first stage under another name."""
    pack = require_pack("msmarco-v1-passage/dl19")
    inputs["copy:first_stage"] = inputs["run"].parent / "copies" / "bm25.trec"
    shutil.copy(pack / "run.bm25.top100.trec", inputs["copy:first_stage"])
    out = tmp_path_factory.mktemp("suite") / "suite"
    base = ["benchmark", "--suite", "dl19", "--backend", "oracle", "--max-queries", "1", "--no-progress"]
    assert main([*base, "--output-dir", str(out)]) == 0
    return base, out


@pytest.mark.parametrize("key", [k for k in KEYS if CHANGES.get(k, (0, 0, 0))[2] is not None])
def test_the_benchmark_refuses_a_resume_that_changes(key, inputs, suite, tmp_path, capsys):
    base, finished = suite
    out = tmp_path / "suite"
    shutil.copytree(finished, out)
    before = {str(p): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    change = flags({}, CHANGES[key][2], inputs)
    code = main([*base, *change, "--output-dir", str(out), "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and "with other settings" in err and refusal_names(err, key), err
    assert {str(p): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before


# --- a run recorded with the method under "mode" ---------------------------------------------------------------

def record_method_as_mode(path: Path, key_path: tuple[str, ...] = ()) -> None:
    """Rewrite the JSON record ``path`` as an earlier rearank wrote it: the method under ``mode``."""
    record = json.loads(path.read_text())
    settings = record
    for key in key_path:
        settings = settings[key]
    settings["mode"] = settings.pop("method")
    path.write_text(json.dumps(record))


def test_a_run_recorded_with_mode_is_refused_with_one_line(inputs, cli_run, tmp_path, capsys):
    out = finished_copy(cli_run, tmp_path)
    stats = out.with_name(out.name + ".stats.json")
    record_method_as_mode(stats, ("config",))
    before = outputs_of(out)
    code = main(["rerank", *flags(rerank_base(inputs), {}, inputs), "--output", str(out), "--resume"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{stats} (the settings of the run in {out}) records its method under 'mode'" in err
    assert err.endswith("start a new output folder (or --output file) and run without --resume")
    after = outputs_of(out)  # the run's files as they were (beside them only the lock the refusal held)
    assert {name: after[name] for name in before} == before and set(after) - set(before) <= {f".{out.name}.lock"}


def test_a_suite_recorded_with_mode_is_refused_with_one_line(suite, tmp_path, capsys):
    base, finished = suite
    out = tmp_path / "suite"
    shutil.copytree(finished, out)
    record_method_as_mode(out / "suite.json")
    before = {str(p): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    code = main([*base, "--output-dir", str(out), "--resume"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"--resume: {out / 'suite.json'} records its method under 'mode'" in err and "new output folder" in err
    assert {str(p): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before
