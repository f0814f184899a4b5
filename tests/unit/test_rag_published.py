"""The published figures ``rag eval`` prints under its table, pinned whole for each kind of run: the default run
(RRPO's Table 1), a BAR-RAG selector or generator run (BAR-RAG's Table 1), an ARENA run (ARENA's Table 3)."""

from __future__ import annotations

import pytest

from rearank.errors import RearankError
from rearank.methods.arena.reading import MEASURES as ARENA_MEASURES
from rearank.methods.card import Published, PublishedRow, card
from rearank.rag.evaluate import MEASURES, markdown_table, published_rows
from rearank.rag.selectors import selector_card

PER_K = "| run | k | EM | F1 | Hit | answer recall | support recall | all support in top-k |"
RULE = "| --- | --- | --- | --- | --- | --- | --- | --- |"
OURS = " | 12.50 | 25.00 | 37.50 | 50.00 | 62.50 | 75.00 |"
RRPO_HOTPOTQA = ["| RRPO paper, hotpotqa: BM25 | 3 | 24.23 | 35.42 | | | | |",
                 "| RRPO paper, hotpotqa: BM25 + gte reranker | 3 | 28.24 | 41.23 | | | | |",
                 "| RRPO paper, hotpotqa: BM25 + gte reranker + RRPO | 3 | 30.03 | 43.22 | | | | |"]
BARRAG = [f"| BAR-RAG paper (Table 1, average EM of 7 QA sets, Qwen2.5-7B): {name} | 5 | {em} | | | | | |"
          for name, em in (("RAG", "26.90"), ("RAG + reranker", "28.00"), ("RAG SFT", "31.80"),
                            ("BAR-RAG iteration 1", "37.20"), ("BAR-RAG iteration 2", "38.80"),
                            ("BAR-RAG iteration 3", "39.10"))]
ORACLE_READ = ("Not comparable: our rows read with the gold reader, a rule that gives a gold answer when the passages "
               "it reads hold one, so their EM and F1 measure whether the answer was retrieved (an upper bound for "
               "any reader), while the {paper}'s figures are a language model's answers. Compare our runs with each "
               "other (answer recall, Hit); compare with the paper only a run with an LLM reader.")


def cited(name: str, reader_note: str = ORACLE_READ) -> list[str]:
    """The lines under the published rows of card ``name``: the full citation, then what compares."""
    published = card(name).published
    return ["", f"Published rows: {published.citation}.", reader_note.format(paper=published.paper)]


ARENA_HEADER = [("| run | EM | F1 | Hit | format ok | relevance exact | relevance overlap | relevance precision | "
                 "relevance recall | LLM judge |"), "| --- |" + " --- |" * 9]
ARENA_OURS = "| a (ours, on this sample, n=3) | 10.00 | 20.00 | 30.00 | 40.00 | 50.00 | 60.00 | 70.00 | 80.00 |"


def per_k(ks, judge=False, **extra):
    """Metrics of a per-k run over 3 questions: measure i is (i + 1) / 8 at every k."""
    row = {**{name: (i + 1) / 8 for i, name in enumerate(MEASURES)}, **({"judge": 0.5} if judge else {})}
    return {"questions": 3, "k": {str(k): {**row, "reader_failed": 0} for k in ks}, **extra}


def arena(judge=False):
    """Metrics of an ARENA run over 3 questions: measure i is (i + 1) / 10."""
    row = {**{name: (i + 1) / 10 for i, name in enumerate(ARENA_MEASURES)}, **({"judge": 0.5} if judge else {})}
    return {"questions": 3, "k": {"arena": {**row, "reader_failed": 0}}}


def lines(metrics, config, sources):
    return markdown_table(metrics, config, sources).split("\n")


def test_a_default_run_on_hotpotqa_prints_rrpos_table_1():
    assert lines(per_k([1, 3, 5]), {"label": "d", "selector": "none", "template": "plain"}, ["hotpotqa"]) == [
        PER_K, RULE, *(f"| d (ours, on this sample, n=3) | {k}{OURS}" for k in (1, 3, 5)), *RRPO_HOTPOTQA,
        *cited("pointwise")]


def test_a_pointwise_run_prints_rrpos_table_1_for_each_of_its_sources_with_the_papers_k():
    table = lines(per_k([3]), {"label": "p", "selector": "pointwise:m", "template": "rrpo"}, ["ambignq", "hotpotqa"])
    assert table == [PER_K, RULE, f"| p (ours, on this sample, n=3) | 3{OURS}",
                     "| RRPO paper, ambignq: BM25 | 5 | 20.33 | 32.18 | | | | |",
                     "| RRPO paper, ambignq: BM25 + gte reranker | 5 | 35.51 | 48.55 | | | | |",
                     "| RRPO paper, ambignq: BM25 + gte reranker + RRPO | 5 | 36.56 | 49.67 | | | | |",
                     *RRPO_HOTPOTQA, *cited("pointwise")]


def test_a_run_on_a_set_rrpo_did_not_use_prints_none_of_its_rows():
    assert lines(per_k([3]), {"label": "d", "selector": "bm25", "template": "plain"}, ["musique"]) == [
        PER_K, RULE, f"| d (ours, on this sample, n=3) | 3{OURS}"]


def test_a_barrag_selector_run_prints_barrags_table_1_and_the_selector_outputs():
    metrics = per_k([5], selector_statuses={"ok": 2, "no_answer": 1})
    assert lines(metrics, {"label": "b", "selector": "barrag:sel", "template": "plain"}, ["hotpotqa"]) == [
        PER_K, RULE, f"| b (ours, on this sample, n=3) | 5{OURS}", *BARRAG, *cited("barrag-selector"), "",
        "selector outputs: ok 2, no_answer 1"]


def test_a_barrag_generator_run_prints_barrags_table_1_without_a_judge_cell():
    table = lines(per_k([5], judge=True), {"label": "g", "selector": "none", "template": "barrag_generator"},
                  ["hotpotqa"])
    assert table == [PER_K + " LLM judge |", RULE + " --- |", f"| g (ours, on this sample, n=3) | 5{OURS} 50.00 |",
                     *BARRAG, *cited("barrag-generator")]


def test_a_per_k_run_passes_over_a_reading_card_for_its_selectors_figures_or_the_defaults():
    """ARENA's figures are of its one reading; a run read by each k with its template (no reading given) is not."""
    for selector, expected in (("barrag:sel", [*BARRAG, *cited("barrag-selector")]),
                               ("none", [*RRPO_HOTPOTQA, *cited("pointwise")])):
        assert lines(per_k([5]), {"label": "b", "selector": selector, "template": "arena"}, ["hotpotqa"]) == [
            PER_K, RULE, f"| b (ours, on this sample, n=3) | 5{OURS}", *expected]


def test_an_arena_run_prints_arenas_table_3_for_its_set():
    assert lines(arena(), {"label": "a", "selector": "none", "template": "arena"}, ["hotpotqa"]) == [
        *ARENA_HEADER, ARENA_OURS + "  |",
        "| ARENA paper (Table 3), ARENA-Qwen-7B, hotpotqa | 62.80 | 76.20 | | | | | | | 81.20 (GPT-4o) |",
        "| ARENA paper (Table 3), Qwen2.5-7B, hotpotqa | 48.40 | 62.80 | | | | | | | 66.00 (GPT-4o) |",
        *cited("arena")]


def test_a_judged_arena_run_over_two_sets_prints_each_systems_rows_in_the_sets_order():
    assert lines(arena(judge=True), {"label": "a", "selector": "none", "template": "arena"}, ["2wiki", "hotpotqa"]) == [
        *ARENA_HEADER, ARENA_OURS + " 50.00 |",
        "| ARENA paper (Table 3), ARENA-Qwen-7B, 2wiki | 66.00 | 75.20 | | | | | | | 78.60 (GPT-4o) |",
        "| ARENA paper (Table 3), ARENA-Qwen-7B, hotpotqa | 62.80 | 76.20 | | | | | | | 81.20 (GPT-4o) |",
        "| ARENA paper (Table 3), Qwen2.5-7B, 2wiki | 33.40 | 42.40 | | | | | | | 41.20 (GPT-4o) |",
        "| ARENA paper (Table 3), Qwen2.5-7B, hotpotqa | 48.40 | 62.80 | | | | | | | 66.00 (GPT-4o) |",
        *cited("arena")]


def test_a_run_read_by_an_llm_says_its_figures_compare_in_kind_only():
    config = {"label": "d", "selector": "none", "template": "plain", "reader": "hf", "reader_model": "Qwen/Qwen2.5-7B"}
    assert lines(per_k([3]), config, ["hotpotqa"])[-1] == (
        "Comparable in kind only: our rows read with Qwen/Qwen2.5-7B on this sample, the RRPO paper's with its own "
        "reader model, corpus, first stage and full test sets; compare the gaps between rows (what a reranker or "
        "selector adds), not the values.")


@pytest.mark.parametrize(("name", "arxiv"), [("pointwise", "arXiv:2604.02091, Table 1"),
                                             ("barrag-selector", "arXiv:2602.03689"),
                                             ("arena", "arXiv:2505.13258v1")])
def test_each_cards_figures_cite_their_paper(name, arxiv):
    assert arxiv in card(name).published.citation


def test_the_cards_hold_the_figures_and_the_selectors_name_their_cards():
    assert card("barrag-selector").published is card("barrag-generator").published is not None
    assert card("arena").published.paper == "ARENA paper (Table 3)"
    assert card("pointwise").published.paper == "RRPO paper" and card("plain").published is None
    assert [selector_card(spec) and selector_card(spec).name for spec in ("barrag:m", "pointwise:m", "listwise",
                                                                         "none", "bm25", "oracle")] == [
        "barrag-selector", "pointwise", "listwise", None, None, None]


def test_a_papers_rows_fill_the_columns_it_gives_the_judge_one_with_its_note():
    paper = Published("P", ("judge", "f1"), (PublishedRow("S", None, 4, (0.5, 0.25)),
                                             PublishedRow("T", "nq", 2, (0.75, 1.0))),
                      label="{paper}: {system}", scale=100, notes={"judge": "J"})
    assert published_rows(paper, ("em", "f1", "judge"), ["hotpotqa"], k_column=True) == [
        "| P: S | 4 | | 25.00 | 50.00 (J) |"]  # T is of a set the run did not use
    assert published_rows(paper, ("f1",), ["nq"], k_column=False) == ["| P: S | 25.00 |", "| P: T | 100.00 |"]


def test_a_row_whose_values_do_not_match_the_measures_is_refused():
    with pytest.raises(RearankError, match=r"^P, S: 1 values for the 2 measures em, f1$"):
        Published("P", ("em", "f1"), (PublishedRow("S", None, 5, (30.0,)),))
