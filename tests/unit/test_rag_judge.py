"""LLM-as-a-judge (ARENA App. C.3): the prompt holds the gold answers and the response, generation is greedy, a
reply starting with yes is a correct verdict; rag eval records it and prints the column."""

from __future__ import annotations

import json

from rearank.backends.base import Generation
from rearank.rag.evaluate import RagEvaluation
from rearank.rag.judge import Judge, verdict
from rearank.rag.readers import GoldReader
from rearank.rag.selectors import make_selector
from rearank.types import Passage, QAItem


class SynonymJudge:
    """Says yes when the response names a gold answer or 'JFK' for John F. Kennedy; records the settings."""

    name = "fake-judge"

    def __init__(self) -> None:
        self.prompts, self.settings = [], []

    def generate(self, prompts, settings):
        self.prompts.extend(prompts)
        self.settings.append(settings)
        out = []
        for prompt in prompts:
            text = prompt.messages[-1]["content"]
            gold, reply = text.split("The model replied:")
            hit = any(line[2:] in reply for line in gold.splitlines() if line.startswith("- "))
            hit = hit or ("JFK" in reply and "John F. Kennedy" in gold)
            out.append(Generation("Yes." if hit else "no", 5, 1))
        return out


def test_verdict_reads_yes_or_no():
    assert verdict("Yes.") == verdict(" yes") == 1.0
    assert verdict("no") == verdict("yesterday") == verdict("") == 0.0


def test_judge_prompt_and_greedy_settings():
    backend = SynonymJudge()
    judge = Judge(backend, "gpt-4o")
    assert judge.judge([(["John F. Kennedy", "Kennedy"], "JFK"), (["Paris"], "Lyon")]) == [1.0, 0.0]
    text = backend.prompts[0].messages[-1]["content"]
    assert "- John F. Kennedy\n- Kennedy" in text and text.rstrip().endswith("nothing else.")
    assert backend.settings[0].temperature == 0.0


def test_rag_eval_records_the_judge(tmp_path):
    items = [QAItem(f"q{i}", f"Who {i}?", (f"ans{i}",), (Passage("a", "", "x"), Passage("b", "", "y")),
                    frozenset({"a" if i % 2 else "b"})) for i in range(4)]
    metrics = RagEvaluation(tmp_path / "j", {"label": "j"}).run(
        items, make_selector("none"), GoldReader(), [1], progress=False, judge=Judge(SynonymJudge(), "m"))
    rows = [json.loads(x) for x in (tmp_path / "j" / "items.jsonl").read_text().splitlines()]
    assert [r["k"]["1"]["judge"] for r in rows] == [r["k"]["1"]["em"] for r in rows] == [0.0, 1.0, 0.0, 1.0]
    assert metrics["k"]["1"]["judge"] == 0.5
    assert "LLM judge" in (tmp_path / "j" / "table.md").read_text()
