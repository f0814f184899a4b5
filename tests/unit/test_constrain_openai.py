"""``-O constrain=answer`` on the openai backend: the structured-output request each server kind takes, and a
one-line error when the server refuses it or answers outside the format (scripted stub server)."""

from __future__ import annotations

import json
import re

import pytest

from rearank.backends.base import Prompt, SamplingSettings
from rearank.backends.constrain import EXTRA_KEY
from rearank.backends.openai import OpenAIBackend
from rearank.errors import RearankError
from rearank.grammar import AnswerGrammar
from rearank.methods import Listwise
from rearank.methods.listwise.answer import parse_answer
from tests.unit.test_openai_backend import FAST, Reply, completion, stub  # noqa: F401 (stub: a fixture)

GRAMMAR = Listwise().answer_grammar(3)
PROMPT = Prompt(messages=({"role": "user", "content": "rank"},), answer=GRAMMAR)
SETTINGS = SamplingSettings(max_new_tokens=64)
GOOD = "<think>short</think>\n<answer>[2] > [3] > [1]</answer>"


@pytest.mark.parametrize(("api", "field"), [("vllm", "structured_outputs"), ("vllm-guided", "guided_regex"),
                                            ("sglang", "regex"), ("rearank", "vllm_xargs")])
def test_each_server_kind_gets_its_request(stub, api, field):  # noqa: F811
    server = stub(Reply(body=completion(GOOD)))
    backend = OpenAIBackend("m", base_url=server.root, constrain="answer", structured_output=api, **FAST)
    [generation] = backend.generate([PROMPT], SETTINGS)
    assert parse_answer(generation.text, 3).status == "ok"
    sent = server.requests[0]["body"][field]
    if api == "rearank":
        spec = json.loads(sent[EXTRA_KEY])
        assert AnswerGrammar.from_dict(spec["grammar"]) == GRAMMAR and spec["constrain"] is True
    else:
        regex = sent["regex"] if api == "vllm" else sent
        # the reasoning gets the characters the longest answer leaves of max_new_tokens (one a token at least)
        room = SETTINGS.max_new_tokens - GRAMMAR.max_answer_chars() - 1 - len("<think>")
        assert regex == GRAMMAR.regex(room) and re.fullmatch(regex, GOOD)
        assert re.fullmatch(regex, GOOD.replace("short", "x" * room))
        assert not re.fullmatch(regex, GOOD.replace("short", "x" * (room + 1)))


def test_no_constraint_no_grammar_no_request_field(stub):  # noqa: F811
    server = stub(Reply(body=completion("anything")))
    OpenAIBackend("m", base_url=server.root, **FAST).generate([PROMPT], SETTINGS)
    OpenAIBackend("m", base_url=server.root, constrain="answer", **FAST).generate(
        [Prompt(messages=PROMPT.messages)], SETTINGS)
    assert not any(key in r["body"] for r in server.requests for key in ("structured_outputs", "vllm_xargs"))


def test_a_server_that_ignores_the_request_stops_the_run(stub):  # noqa: F811
    server = stub(Reply(body=completion("I think [1] is best.")))
    backend = OpenAIBackend("m", base_url=server.root, constrain="answer", **FAST)
    with pytest.raises(RearankError, match=r"answered outside the format .* or -O constrain=off"):
        backend.generate([PROMPT], SETTINGS)
    # a reply cut by max_tokens is not the server's fault: it comes back (status truncated)
    server = stub(Reply(body=completion("<think>long", finish_reason="length")))
    [cut] = OpenAIBackend("m", base_url=server.root, constrain="answer", **FAST).generate([PROMPT], SETTINGS)
    assert cut.finish_reason == "length"


def test_a_server_that_refuses_the_request_stops_the_run(stub):  # noqa: F811
    server = stub(Reply(status=400, body={"error": "unknown field structured_outputs"}))
    backend = OpenAIBackend("m", base_url=server.root, constrain="answer", structured_output="vllm", **FAST)
    with pytest.raises(RearankError, match=r"refused the structured-output request \(HTTP 400"):
        backend.generate([PROMPT], SETTINGS)
    assert len(server.requests) == 1  # not retried


def test_option_errors_are_one_line():
    with pytest.raises(RearankError, match="max_think_tokens .* needs -O structured_output=rearank"):
        OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", max_think_tokens=10)
    with pytest.raises(RearankError, match="structured_output='xgrammar' .* choose one of vllm, vllm-guided"):
        OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", structured_output="xgrammar")
    with pytest.raises(RearankError, match="constrain='yes'"):
        OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", constrain="yes")
