"""The pointwise method on the one engine: score parsing, sorting, unscored passages, the oracle, the CLI."""

from __future__ import annotations

import pytest

from rearank.backends.base import ERROR, BackendBase, Generation
from rearank.backends.oracle import OracleBackend
from rearank.engine import Engine
from rearank.errors import RearankError
from rearank.methods import METHODS, Pointwise
from rearank.methods.pointwise import parse_score
from rearank.methods.pointwise.method import NO_SCORE, OK
from tests.methods import request


@pytest.mark.parametrize(("text", "score"), [
    ("3.5", 3.5), (" -1e-3 \n", -0.001), ("7", 7.0), (".5", 0.5), ("Yes, it is.", 1.0), ("no", 0.0),
    ("**YES**", 1.0), ("maybe", None), ("", None), ("nan", None), ("3.5 points", None), ("yesterday", None),
])
def test_parse_score(text, score):
    assert parse_score(text) == score


class Scripted(BackendBase):
    """Answers a passage ``d<i>`` with ``answers[i]``; ``None`` fails the generation."""

    def __init__(self, answers):
        self.answers, self.sent = answers, []

    def generate(self, prompts, settings):
        self.sent += prompts
        out = []
        for p in prompts:
            answer = self.answers[int(p.docids[0][1:])]
            out.append(Generation("", 0, 0, finish_reason=ERROR) if answer is None else Generation(answer, 5, 1))
        return out


def test_sorts_the_top_k_by_score_and_keeps_the_tail():
    backend = Scripted(["0.1", "2", "no", "yes", "9"])
    result = Engine(backend, Pointwise(top_k=4), batch_size=3).rerank([request(5)], progress=False)[0]
    assert [c.docid for c in result.candidates] == ["d1", "d3", "d0", "d2", "d4"]  # d4 is beyond top_k: last
    assert len(backend.sent) == 4 and all(p.pair == ("what?", "", f"passage {i}")
                                          for i, p in enumerate(backend.sent))
    assert "Query: what?\nDocument: passage 0\n" in backend.sent[0].messages[0]["content"]
    assert [(t.start, t.status) for t in result.traces] == [(0, OK), (1, OK), (2, OK), (3, OK)]


def test_unscored_passages_follow_the_scored_ones_in_first_stage_order():
    backend = Scripted(["garbage", None, "1", "0.5"])
    result = Engine(backend, Pointwise()).rerank([request(4)], progress=False)[0]
    assert [c.docid for c in result.candidates] == ["d2", "d3", "d0", "d1"]
    assert [t.status for t in result.traces] == [NO_SCORE, ERROR, OK, OK]  # a failed call is an error, not a no-score
    every_failed = Engine(Scripted([None] * 3), Pointwise()).rerank([request(3)], progress=False)[0]
    assert [c.docid for c in every_failed.candidates] == ["d0", "d1", "d2"]


def test_ties_keep_first_stage_order_and_one_candidate_needs_no_call():
    result = Engine(Scripted(["1", "1", "2"]), Pointwise()).rerank([request(3)], progress=False)[0]
    assert [c.docid for c in result.candidates] == ["d2", "d0", "d1"]
    lone = Scripted(["1"])
    assert Engine(lone, Pointwise()).rerank([request(1)], progress=False)[0].traces == () and lone.sent == []


def test_oracle_answers_the_grade_and_the_method_is_registered():
    qrels = {"q1": {"d2": 3, "d0": 1}}
    result = Engine(OracleBackend(qrels), Pointwise()).rerank([request(4)], progress=False)[0]
    assert [c.docid for c in result.candidates] == ["d2", "d0", "d1", "d3"]
    assert METHODS["pointwise"] is Pointwise
    with pytest.raises(RearankError, match="top_k"):
        Pointwise(top_k=0)


def test_rerank_cli_pointwise_with_the_oracle(tmp_path, capsys):
    from rearank.cli import main
    from rearank.io.requests_jsonl import write_requests

    requests = tmp_path / "requests.jsonl"
    write_requests(requests, [request(6)])
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d5 2\nq1 0 d3 1\n")
    out = tmp_path / "run.trec"
    assert main(["rerank", "--requests", str(requests), "--qrels", str(qrels), "--method", "pointwise",
                 "--backend", "oracle", "-o", str(out), "--no-progress"]) == 0
    assert [line.split()[2] for line in out.read_text().splitlines()][:2] == ["d5", "d3"]
    assert "after 1.0000" in capsys.readouterr().out
