"""Report and page text is for its readers: no text under ``benchmark/`` or ``rearank/`` (reports, tables, cards,
pages, docstrings) refers to a project issue or tells how a figure was looked up, and every published figure the
reports print cites its paper (authors, title, arXiv id, table)."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from benchmark.report import build_report
from benchmark.results import SuiteResult
from rearank.methods.card import cards

ROOT = Path(__file__).resolve().parents[2]
TEXT = ("*.py", "*.json", "*.md", "*.yaml", "*.txt", "*.html", "*.j2")
#: An issue reference, or a narration of how a figure was found.
LOOKUP = re.compile(r"\bissues? ?#?\d+|/issues/\d+|project(?:'s)? issue|\bfile id\b|search index|"
                    r"transcribed|markdown conversion", re.IGNORECASE)
FIGURE_FILES = ("paper_figures.json", "paper_figures_grouprank.json")


def texts() -> list[Path]:
    return sorted(p for folder in ("benchmark", "rearank") for pattern in TEXT
                  for p in (ROOT / folder).rglob(pattern) if "__pycache__" not in p.parts)


def test_no_text_refers_to_an_issue_or_tells_how_a_figure_was_looked_up():
    found = [f"{path.relative_to(ROOT)}:{number}: {line.strip()}" for path in texts()
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if LOOKUP.search(line)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("name", FIGURE_FILES)
def test_each_published_figures_file_cites_its_paper_and_says_nothing_about_an_index(name):
    figures = json.loads(resources.files("benchmark").joinpath(name).read_text(encoding="utf-8"))
    assert re.search(r"\. .+\. .*arXiv:\d{4}\.\d{5}.*, Tables? ", figures["citation"]), figures["citation"]
    words = json.dumps({k: v for k, v in figures.items() if k != "tables"})
    assert "index" not in words.lower() and "/work/" not in words


def test_the_reports_published_section_cites_the_paper_and_each_table_shown():
    suite = SuiteResult(path=Path("s"), config={"datasets": ["dl19"], "label": "S"}, datasets={}, skipped={})
    section = build_report([suite]).split("## Published figures")[1]
    assert "Le Zhang, Bo Wang, Xipeng Qiu, Siva Reddy, Aishwarya Agrawal. Rearank: Reasoning Re-ranking Agent via " \
           "Reinforcement Learning. EMNLP 2025, arXiv:2505.20046" in section
    assert "- Table 1: TREC-DL 2019 and 2020 and 7 BEIR datasets" in section and "Table 2:" not in section
    assert not LOOKUP.search(section) and "index" not in section.lower()


def test_every_cards_published_figures_cite_their_paper():
    published = [card.published for card in cards() if card.published is not None]
    assert published
    for figures in published:
        assert re.search(r"\. .+\. arXiv:\d{4}\.\d{5}(v\d)?\b.*, Table \d", figures.citation), figures.citation
