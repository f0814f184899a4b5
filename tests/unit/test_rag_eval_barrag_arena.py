"""`rag eval` with a BAR-RAG selector, the BAR-RAG generator template and an ARENA generator, on the first three
HotpotQA dev questions, through a scripted backend whose outputs are written by hand; and the two QA oracles agree."""

from __future__ import annotations

import json

import pytest

from rearank.backends.base import Generation, Prompt, SamplingSettings
from rearank.backends.qa_oracle import QAOracleBackend
from rearank.io.qa import load_qa
from rearank.methods.arena.reading import arena_prompt
from rearank.methods.barrag.prompt import generator_messages
from rearank.methods.card import card
from rearank.rag.barrag.select import BarragSelector, selection_prompt
from rearank.rag.evaluate import RagEvaluation
from rearank.rag.readers import GoldReader, LLMReader
from rearank.rag.selectors import make_selector
from tests.conftest import require_pack

# q1 Scott Derrickson / Ed Wood: gold "yes", supporting pids 1, 4 (shown 2nd and 5th)
# q2 Corliss Archer: gold "Chief of Protocol", supporting pids 1, 6 (2nd and 7th)
# q3 Animorphs: gold "Animorphs", supporting pids 2, 8 (3rd and 9th)
SELECTOR = {
    0: "<think>Doc [2] and Doc [5] give both nationalities.</think><answer>[2], [5]</answer>",
    1: "<think>the film, then the actress</think><answer>[7], [7], [2]</answer>",  # a repeated id
    2: "I would pick document 3.",  # no <answer>
}
GENERATOR = {
    0: "<think>Doc [1] and Doc [2] say American.</think><answer>Yes</answer>",
    1: "<think>Doc [1]</think><answer>Chief of Protocol of the United States</answer>",
    2: "<think></think><answer>Goosebumps</answer>",
}
ARENA = {
    0: "<relevance>[5, 2]</relevance><analysis>both are American</analysis><answer>yes</answer>",
    1: "<relevance>[2,3]</relevance><analysis>Shirley Temple</analysis><answer>Chief_of Protocol</answer>",
    2: "Sure. <relevance>[1]</relevance><analysis>x</analysis><answer>Animorphs</answer>",  # a leading word
}


class Scripted:
    """Answers each prompt with the hand-written output for its question and role; records every prompt."""

    name = "scripted"

    def __init__(self, items) -> None:
        self.index = {item.qid: i for i, item in enumerate(items)}
        self.prompts: list = []

    def generate(self, prompts, settings):
        out = []
        for prompt in prompts:
            self.prompts.append(prompt)
            system = prompt.messages[0]["content"]
            table = SELECTOR if system.startswith("You choose evidence") else (
                ARENA if "<relevance>" in system else GENERATOR)
            out.append(Generation(table[self.index[prompt.qid]], 10, 5))
        return out


@pytest.fixture(scope="module")
def items():
    return load_qa(require_pack("qa") / "hotpotqa/dev_distractor.first103.json", limit=3)


def records(folder):
    return [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]


def test_barrag_selector_and_generator(items, tmp_path):
    backend = Scripted(items)
    selector = BarragSelector(backend, "sel")
    reader = LLMReader(backend, "gen", template="barrag_generator", max_passage_tokens=None)
    config = {"label": "barrag", "selector": "barrag:sel", "template": "barrag_generator"}
    metrics = RagEvaluation(tmp_path / "o", config).run(items, selector, reader, [2], progress=False)
    rows = records(tmp_path / "o")
    # the selector saw selection_prompt(item); the generator saw generator_messages over the chosen passages
    assert [list(p.messages) for p in backend.prompts[:3]] == [selection_prompt(i) for i in items]
    assert list(backend.prompts[3].messages) == generator_messages(items[0].question,
                                                                   [items[0].passage("1"), items[0].passage("4")])
    assert [r["ranking"] for r in rows] == [["1", "4"], ["6", "1"], []]  # [7],[7],[2] -> pids 6, 1; none parsed
    assert [r["selector"]["status"] for r in rows] == ["ok", "repeated_id", "no_answer"]
    assert [r["k"]["2"]["answer"] for r in rows] == ["Yes", "Chief of Protocol of the United States", "Goosebumps"]
    # q2 F1: 6 tokens (chief of protocol of united states) vs 3; common 3 -> P 1/2, R 1, F1 2/3; Hit 1
    assert rows[1]["k"]["2"]["f1"] == pytest.approx(2 / 3) and rows[1]["k"]["2"]["hit"] == 1.0
    m = metrics["k"]["2"]
    assert m["em"] == pytest.approx(1 / 3)  # (1 + 0 + 0) / 3
    assert m["f1"] == pytest.approx(5 / 9)  # (1 + 2/3 + 0) / 3
    assert m["support_all"] == pytest.approx(2 / 3)  # q1 {1,4}, q2 {6,1}: all support; q3 nothing
    assert metrics["selector_statuses"] == {"no_answer": 1, "ok": 1, "repeated_id": 1}
    table = (tmp_path / "o" / "table.md").read_text()
    assert "| barrag (ours, on this sample, n=3) | 2 | 33.33 | 55.56 |" in table
    assert "BAR-RAG iteration 3 | 5 | 39.10 |" in table and "RRPO paper" not in table
    assert "no_answer 1, ok 1, repeated_id 1" in table


def test_arena_generator_answers_format_and_relevance(items, tmp_path):
    backend = Scripted(items)
    reader = LLMReader(backend, "arena", template="arena", max_passage_tokens=None)
    metrics = RagEvaluation(tmp_path / "a", {"label": "arena"}).run(
        items, make_selector("none"), reader, [5], progress=False, reading=card("arena"))
    assert [list(p.messages) for p in backend.prompts] == [arena_prompt(i) for i in items]
    rows = records(tmp_path / "a")
    q1, q2, q3 = (r["k"]["arena"] for r in rows)
    assert (q1["answer"], q1["pids"], q1["em"], q1["format_ok"], q1["relevance_exact"]) == ("yes", ["1", "4"],
                                                                                          1.0, 1.0, 1.0)
    # q2: "Chief_of Protocol" -> "chief of protocol" under ARENA normalisation; ids [2,3] vs gold [2,7]
    assert (q2["em"], q2["pids"], q2["relevance_exact"], q2["relevance_overlap"]) == (1.0, ["1", "2"], 0.0, 1.0)
    assert (q2["relevance_precision"], q2["relevance_recall"]) == (0.5, 0.5)
    # q3: a leading word breaks the format; the answer is still read; [1] vs gold [3, 9]: no overlap
    assert (q3["format_ok"], q3["em"], q3["relevance_overlap"], q3["relevance_recall"]) == (0.0, 1.0, 0.0, 0.0)
    m = metrics["k"]["arena"]
    assert m["em"] == 1.0 and m["format_ok"] == pytest.approx(2 / 3)
    assert m["relevance_exact"] == pytest.approx(1 / 3) and m["relevance_overlap"] == pytest.approx(2 / 3)
    assert m["relevance_precision"] == pytest.approx(0.5)  # (1 + 1/2 + 0) / 3
    assert m["relevance_recall"] == pytest.approx(0.5)
    table = (tmp_path / "a" / "table.md").read_text()
    assert "| arena (ours, on this sample, n=3) | 100.00 | 100.00 | 100.00 | 66.67 | 33.33 | 66.67 | 50.00 |" in table
    assert "ARENA paper (Table 3), ARENA-Qwen-7B, hotpotqa | 62.80 | 76.20 |" in table


def test_reader_oracle_and_served_oracle_agree(items):
    """The oracle reader and the qa-oracle backend share one rule: same verdicts on the same contexts."""
    served = QAOracleBackend(str(require_pack("qa") / "hotpotqa/dev_distractor.first103.json"))
    reader = GoldReader(require="all")
    greedy = SamplingSettings(temperature=0)
    verdicts = []
    for item in items:
        gold = [p for p in item.passages if p.pid in item.supporting]
        for context in (gold, gold[:1], [p for p in item.passages if p.pid not in item.supporting]):
            (expected,) = reader.read([(item, context)])
            (text,) = served.generate([Prompt(tuple(generator_messages(item.question, context)))], greedy)
            assert f"<answer>{expected.answer}</answer>" in text.text
            verdicts.append(expected.answer == item.answers[0])
    assert verdicts == [True, False, False] * 3  # all support shown; half of it; none of it
