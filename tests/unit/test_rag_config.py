"""The typed ``rag eval`` configuration: every check, its run record and resume, and bad settings failing before
any question, corpus or model loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rearank.cli import main
from rearank.errors import RearankError
from rearank.rag.config import RagConfig, RetrievalSettings, parse_ks
from rearank.rag.evaluate import RagEvaluation


def config(tmp_path: Path, **settings) -> RagConfig:
    return RagConfig(data=tmp_path / "qa.jsonl", output_dir=tmp_path / "out", **settings)


@pytest.mark.parametrize(("settings", "message"), [
    ({"format": "csv"}, "--format 'csv': choose one of auto, hotpotqa"),
    ({"limit": 0}, "--limit must be at least 1, got 0"),
    ({"ks": ()}, "every k must be at least 1"),
    ({"ks": (0, 3)}, "--k '0,3': every k must be at least 1"),
    ({"style": "trec"}, "--style 'trec': choose one of squad, arena"),
    ({"selector": "dense:m"}, "--selector 'dense:m': unknown selector 'dense'; choose one of none, oracle"),
    ({"reader": "nope"}, "--reader 'nope': choose one of gold, noisy-gold"),
    ({"batch_size": 0}, "--batch-size must be at least 1, got 0"),
    ({"reader_model": "m"}, "the gold reader takes no --reader-model"),
    ({"reader": "hf", "reader_model": "m", "max_new_tokens": 0}, "--max-new-tokens must be at least 1, got 0"),
    ({"judge": "m", "judge_backend": "oracle"}, "--judge-backend 'oracle': choose one of"),
    ({"template": "rrpo_scorer_nope"}, "rrpo_scorer_nope"),
])
def test_every_bad_setting_is_one_line_naming_its_flag(tmp_path, settings, message):
    with pytest.raises(RearankError) as err:
        config(tmp_path, **settings)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_reading_card_is_recorded_by_its_name_and_style_and_the_oracle_reads_it(tmp_path):
    arena = config(tmp_path, template="arena")  # the gold reader writes the card's format: no LLM needed
    assert arena.reading.name == "arena" and config(tmp_path).reading is None
    record = arena.record()
    assert (record["k"], record["style"]) == ("arena", "arena")


@pytest.mark.parametrize(("settings", "message"), [
    ({"depth": 0}, "--depth must be at least 1, got 0"),
    ({"candidates": Path("run.trec")}, "--candidates needs --corpus"),
])
def test_bad_retrieval_settings(settings, message):
    with pytest.raises(RearankError, match=message):
        RetrievalSettings(**settings)


def test_k_values_parse_sorted_and_unique_or_fail_naming_the_flag():
    assert parse_ks("5,1,3,1") == (1, 3, 5)
    with pytest.raises(RearankError, match="--k '1,x': expected comma-separated integers"):
        parse_ks("1,x")
    with pytest.raises(RearankError, match="--k ',': every k must be at least 1"):
        parse_ks(",")


def test_an_oracle_reader_ignores_the_llm_answer_budget(tmp_path):
    assert config(tmp_path, max_new_tokens=0).max_new_tokens == 0


def test_record_round_trips_through_the_run_folder_and_a_same_settings_resume_passes(tmp_path):
    first = config(tmp_path, selector="bm25", selector_options={"k1": 0.9}, judge="m",
                   judge_options={"base_url": "http://h/v1"}, ks=(1, 3))
    retrieval = {"corpus": "c.jsonl", "corpus_fingerprint": "abc", "depth": 10, "candidates": None}
    RagEvaluation(first.output_dir, first.record(retrieval))
    written = json.loads((first.output_dir / "config.json").read_text())
    assert written == first.record(retrieval)
    assert written["label"] == "bm25 / gold" and written["k"] == [1, 3]
    assert written["judge"] == {"model": "m", "backend": "openai", "options": {"base_url": "http://h/v1"}}
    config(tmp_path, selector="bm25", selector_options={"k1": 0.9}, judge="m",
           judge_options={"base_url": "http://h/v1"}, ks=(1, 3), resume=True).check_resume()


def test_arena_template_records_arena_k_and_style(tmp_path):
    record = config(tmp_path, reader="hf", reader_model="m", template="arena").record()
    assert record["k"] == "arena" and record["style"] == "arena"


def test_resume_with_other_settings_is_refused_naming_them(tmp_path):
    RagEvaluation(tmp_path / "out", config(tmp_path).record())
    changed = config(tmp_path, ks=(1, 2), style="arena", resume=True)
    with pytest.raises(RearankError, match=r"other settings \(k, style\); use a new --output-dir"):
        changed.check_resume()
    config(tmp_path, ks=(1, 2), style="arena").check_resume()  # a new run (no --resume) checks nothing


def test_resume_check_leaves_the_corpus_keys_to_the_evaluation(tmp_path):
    retrieval = {"corpus": "c.jsonl", "corpus_fingerprint": "abc", "depth": 10, "candidates": None}
    RagEvaluation(tmp_path / "out", config(tmp_path).record(retrieval))
    config(tmp_path, resume=True).check_resume()
    with pytest.raises(RearankError, match=r"other settings \(corpus_fingerprint\)"):
        RagEvaluation(tmp_path / "out", config(tmp_path).record({**retrieval, "corpus_fingerprint": "def"}),
                      resume=True)


@pytest.fixture
def loads(monkeypatch):
    """Record every question file, reader and judge the command would load (none should be)."""
    import rearank.io.qa
    import rearank.rag.judge
    import rearank.rag.readers

    calls = []
    for module, name in ((rearank.io.qa, "load_qa"), (rearank.rag.readers, "make_reader"),
                         (rearank.rag.judge, "make_judge")):
        monkeypatch.setattr(module, name, lambda *a, _name=name, **k: calls.append(_name))
    return calls


@pytest.mark.parametrize(("flags", "message"), [
    (["--reader", "hf", "--reader-model", "slow/70B", "--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
    (["--reader", "hf", "--reader-model", "slow/70B", "--batch-size", "0"], "--batch-size must be at least 1"),
    (["--reader", "hf", "--reader-model", "slow/70B", "--depth", "0"], "--depth must be at least 1"),
    (["--reader", "hf", "--reader-model", "slow/70B", "--candidates", "run.trec"], "--candidates needs --corpus"),
    (["--reader", "hf", "--reader-model", "slow/70B", "--selector", "dense"], "unknown selector 'dense'"),
    (["--reader", "gold", "--reader-model", "slow/70B"], "the gold reader takes no --reader-model"),
])
def test_bad_settings_fail_in_one_line_before_anything_loads(tmp_path, capsys, loads, flags, message):
    code = main(["rag", "eval", "--data", str(tmp_path / "qa.jsonl"), "--output-dir", str(tmp_path / "out"), "--no-progress",
                 *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert loads == []


def test_a_mismatched_resume_fails_before_anything_loads(tmp_path, capsys, loads):
    RagEvaluation(tmp_path / "out", config(tmp_path, reader="hf", reader_model="slow/70B").record())
    code = main(["rag", "eval", "--data", str(tmp_path / "qa.jsonl"), "--output-dir", str(tmp_path / "out"), "--resume",
                 "--reader", "hf", "--reader-model", "slow/70B", "--max-new-tokens", "64"])
    assert code == 2 and "other settings (max_new_tokens)" in capsys.readouterr().err
    assert loads == []
