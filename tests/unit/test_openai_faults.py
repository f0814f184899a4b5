"""The openai backend against each fault of the fault-injecting server: bounded attempts, no crash, no key leak."""

from __future__ import annotations

import pytest

from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.openai import OpenAIBackend
from rearank.backends.registry import make_backend
from rearank.cli import main as cli_main
from rearank.errors import RearankError
from tests.fault_server import FaultServer, answer_for

SETTINGS = SamplingSettings(max_new_tokens=16)
MESSAGES = ({"role": "user", "content": "rank [1] a [2] b [3] c"},)
SENTINEL = "sk-sentinel-0d9c8b7a6f5e4d3c2b1a"


def backend(server: FaultServer, **options) -> OpenAIBackend:
    made = OpenAIBackend("m", base_url=server.base_url, **{"max_retries": 2, "backoff_s": 0.001,
                                                           "max_backoff_s": 0.01, "timeout_s": 2.0, **options})
    made._sleep = lambda s: None
    return made


@pytest.mark.parametrize(("fault", "attempts"), [
    ("500", 2),  # retried, then the good answer
    ("429", 2),
    ("close_mid_body", 2),  # a cut connection is retried
    ("invalid_json", 1),  # a malformed 200 is not retried: the window keeps its order
    ("empty_choices", 1),
    ("null_content", 1),
])
def test_each_fault_ends_in_an_answer_or_an_error_window(fault, attempts):
    with FaultServer(faults={0: fault}) as server:
        [gen] = backend(server).generate([Prompt(messages=MESSAGES)], SETTINGS)
    assert server.requests == attempts
    if attempts == 2:
        assert gen.text == answer_for(list(MESSAGES))[0] and gen.finish_reason == "stop"
    elif fault == "null_content":  # a 200 with no text is an empty answer, parsed as wrong_format downstream
        assert gen.text == "" and gen.finish_reason == "stop"
    else:
        assert gen.finish_reason == "error" and gen.text == ""


def test_timeout_bounds_the_whole_request_not_each_read():
    # The trickling reply takes 0.05 s per 8 bytes (about 30 chunks, 1.5 s); each read is quick, so a per-read
    # timeout of 0.3 s would wait for all of it. The total deadline gives up after a few chunks, every attempt.
    with FaultServer(cycle=["trickle"]) as server:
        [gen] = backend(server, timeout_s=0.3, max_retries=1).generate([Prompt(messages=MESSAGES)], SETTINGS)
    assert gen.finish_reason == "error"
    assert server.requests == 2  # first attempt + 1 retry, each abandoned


def test_response_size_is_capped_and_not_retried():
    with FaultServer(faults={0: "oversized"}, oversized_bytes=200_000) as server:
        [gen] = backend(server, max_response_bytes=100_000).generate([Prompt(messages=MESSAGES)], SETTINGS)
    assert gen.finish_reason == "error" and server.requests == 1


def test_a_server_echoing_the_key_does_not_put_it_in_the_answer(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with FaultServer(cycle=["echo_key"], echo=SENTINEL) as server:
        [gen] = backend(server).generate([Prompt(messages=MESSAGES)], SETTINGS)
    assert SENTINEL not in gen.text and "key=***" in gen.text


@pytest.mark.parametrize(("options", "message"), [
    ({"timeout_s": "abc"}, r"timeout_s='abc' \(openai\): expected a number"),
    ({"max_retries": {"a": 1}}, r"max_retries=\{'a': 1\} \(openai\): expected a whole number, got a mapping"),
    ({"extra_body": "x"}, r"extra_body='x' \(openai\): expected a mapping"),
    ({"extra_body": [1]}, r"extra_body=\[1\] \(openai\): expected a mapping"),
    ({"timeout_s": 0}, r"timeout_s=0 \(openai\): must be > 0"),
    ({"concurrency": True}, r"concurrency=True \(openai\): expected a whole number"),
])
def test_typed_options_refuse_bad_values(options, message):
    with pytest.raises(RearankError, match=message):
        make_backend("openai", "m", **options)


def test_hf_options_are_typed_too():
    with pytest.raises(RearankError, match=r"batch_size=0 \(hf\): must be >= 1"):
        make_backend("hf", "embedded", batch_size=0)


@pytest.mark.parametrize(("flag", "message"), [
    (["-O", "timeout_s=abc"], "timeout_s='abc' (openai): expected a number"),
    (["-O", "timeout_s={a: 1}"], "expected a number, got a mapping"),
    (["-O", "extra_body=5"], "extra_body=5 (openai): expected a mapping"),
    (["-O", "extra_body=" + "[" * 5000 + "]" * 5000], "YAML nested too deeply"),
    (["--temperature", "-0.5"], "--temperature must be a finite number >= 0"),
    (["--top-p", "5"], "--top-p must be in (0, 1]"),
])
def test_rerank_cli_gives_one_line_errors_for_bad_options(tmp_path, capsys, flag, message):
    requests = tmp_path / "r.jsonl"
    requests.write_text('{"query": {"qid": "q", "text": "t"}, "candidates": [{"docid": "d", "score": 1, '
                        '"doc": "x"}, {"docid": "e", "score": 0, "doc": "y"}]}\n')
    code = cli_main(["rerank", "--requests", str(requests), "--backend", "openai", "--model", "m",
                     "-O", "base_url=http://127.0.0.1:9/v1", "-o", str(tmp_path / "out.trec"), "--no-progress", *flag])
    err = capsys.readouterr().err
    assert code != 0 and message in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
