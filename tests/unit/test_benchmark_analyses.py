"""``benchmark.analyses`` on a hand-made suite folder (two datasets, stand-in packs, plots recorded): replayed
orders, window scores, length bins, the three reports' exact text, the thinking switch and the command line."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

import benchmark.run
from benchmark import analyses
from benchmark.analyses import WindowScore, length_bins, length_report, pass_curves, replay, window_scores
from benchmark.results import DatasetResult, SuiteResult, load_suite
from benchmark.tables import LengthBin
from rearank.errors import MissingDataError, RearankError
from rearank.run.files import trace_record
from rearank.types import WindowTrace

R = 1 / math.log2(3)  # nDCG@10 of [0, 1]: the relevant passage second


def trace(qid, start, end, perm, tokens, pass_index=0):
    return WindowTrace(qid, start, end, pass_index, 1, tokens, "", perm, "ok", 0.0)


#: d1, q1 from [a, b, c, d] (top 4 of 5): [c, d] nothing relevant; [a, b] -> [b, a]; pass 1: [b, a, d] reversed;
#: [b, c] kept. q2 is not judged.
TRACES = {"d1": [trace("q1", 2, 4, (1, 0), 10), trace("q1", 0, 2, (1, 0), 20), trace("q1", 0, 3, (2, 1, 0), 40, 1),
                 trace("q1", 2, 4, (0, 1), 30, 1), trace("q2", 0, 2, (1, 0), 50)],
          "d2": [trace("q1", 0, 2, (1, 0), 5), trace("q1", 1, 3, (1, 0), 6)]}
QRELS = {"d1": {"q1": {"b": 1, "c": 0, "z": 1}}, "d2": {"q1": {"b": 1, "c": 1}}}
RUNS = {"d1": {"q1": "abcde", "q2": "vwxyz"}, "d2": {"q1": "abc"}}


def metrics(rerank, bm25=0.25):
    return {system: {"aggregate": {"ndcg_cut_10": value}, "per_query": {"q1": {"ndcg_cut_10": value}}}
            for system, value in (("rerank", rerank), ("bm25", bm25))}


@pytest.fixture
def suite_dir(tmp_path, monkeypatch):
    """A finished suite folder (label m, top 4, 2 passes) of d1 and d2, with stand-ins for their packs."""
    from rearank.data import packs

    folder = tmp_path / "suite"
    for name, traces in TRACES.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "metrics.json").write_text(json.dumps(metrics(0.5)))
        (folder / name / "traces.jsonl").write_text("".join(json.dumps(trace_record(t)) + "\n" for t in traces))
        (tmp_path / f"{name}.trec").write_text("".join(f"{q} Q0 {d} {i + 1} {10 - i} bm25\n" for q, docs in
                                                       RUNS[name].items() for i, d in enumerate(docs)))
    (folder / "suite.json").write_text(json.dumps({"datasets": ["d1", "d2"], "label": "m", "top_k": 4, "passes": 2}))
    monkeypatch.setattr(packs, "resolve", lambda name: SimpleNamespace(run=tmp_path / f"{name}.trec"))
    monkeypatch.setattr(packs, "load_qrels", lambda name: QRELS[name])
    return folder


@pytest.fixture
def plots(monkeypatch):
    """The two plots, recorded instead of drawn: (bins or curves, title, path)."""
    drawn = []

    def record(data, title, path):
        drawn.append((data, title, path))
        return path

    monkeypatch.setattr(analyses, "plot_length_bins", record)
    monkeypatch.setattr(analyses, "plot_pass_curves", record)
    return drawn


def test_replay_applies_the_windows_of_the_first_passes():
    traces = TRACES["d1"][:3]
    assert replay("abcd", traces) == list("dabc")
    assert replay("abcd", traces, passes=1) == list("badc")
    assert replay("abcd", traces, passes=0) == list("abcd")


def test_window_scores_follow_the_order_and_skip_windows_without_a_relevant_passage():
    assert window_scores("abcd", TRACES["d1"][:4], QRELS["d1"]["q1"]) == [
        WindowScore("q1", 0, 20, R, 1.0), WindowScore("q1", 1, 40, 1.0, 0.5), WindowScore("q1", 1, 30, 1.0, 1.0)]
    assert window_scores("ab", [trace("q", 0, 2, (1, 0), 9)], {"a": 2}) == [WindowScore("q", 0, 9, 1.0, R)]


def test_suite_window_scores_pool_the_datasets(suite_dir):
    suite = load_suite(suite_dir)
    assert analyses.suite_window_scores(suite, ["d1", "d2"]) == [
        WindowScore("q1", 0, 20, R, 1.0), WindowScore("q1", 1, 40, 1.0, 0.5), WindowScore("q1", 1, 30, 1.0, 1.0),
        WindowScore("q1", 0, 5, R, 1.0), WindowScore("q1", 0, 6, R, 1.0)]


def test_the_initial_order_is_the_runs_top_k_100_by_default(tmp_path, monkeypatch):
    from rearank.data import packs

    (tmp_path / "big.trec").write_text("".join(f"q Q0 d{i} {i + 1} {200 - i} bm25\n" for i in range(101)))
    monkeypatch.setattr(packs, "resolve", lambda name: SimpleNamespace(run=tmp_path / f"{name}.trec"))
    suite = SuiteResult(tmp_path, {}, {}, {})
    assert analyses._initial_orders(suite, "big") == {"q": [f"d{i}" for i in range(100)]}


def test_missing_traces_are_named(tmp_path):
    with pytest.raises(MissingDataError, match=r"d1/traces\.jsonl is missing; rerun the suite with --resume$"):
        analyses._traces(SuiteResult(tmp_path, {}, {}, {}), "d1")


def score(tokens, before, after):
    return WindowScore("q", 0, tokens, before, after)


def test_length_bins_are_equal_width_the_last_one_closed():
    scores = [score(10, 0.5, 1.0), score(20, 0.25, 0.75), score(40, 1.0, 0.5), score(12, 0.0, 0.5)]
    assert length_bins(scores, 6) == [LengthBin(10, 15, 2, 0.75, 0.5), LengthBin(15, 20, 0, None, None),
                                      LengthBin(20, 25, 1, 0.75, 0.5), LengthBin(25, 30, 0, None, None),
                                      LengthBin(30, 35, 0, None, None), LengthBin(35, 40, 1, 0.5, -0.5)]
    assert len(length_bins(scores)) == 20
    with pytest.raises(RearankError, match="^no window with a relevant passage to bin$"):
        length_bins([])


HEAD = ("# Reasoning length vs. window nDCG@10 (m)\n\nDatasets: {}; {} windows with at least one relevant passage, in "
        "2 equal-width bins of completion tokens. Window nDCG@10 x 100 is computed inside each window (its own passages "
        "give the ideal ranking) after the model's reordering; gain is after minus the presented order.\n\n"
        "| Completion tokens | Windows | Window nDCG@10 after | Gain |\n| --- | ---: | ---: | ---: |\n")


def test_the_length_report_with_its_correlation(suite_dir):
    text, table = length_report(load_suite(suite_dir), ["d1"], 2)
    assert table == [LengthBin(20, 30, 1, 1.0, 1 - R), LengthBin(30, 40, 2, 0.75, -0.25)]
    # tokens 20, 40, 30 against 1, 0.5, 1: rho = -1.5 / sqrt(3); n = 3 (1 degree of freedom): p = 1/3
    assert text == HEAD.format("d1", 3) + ("| 20-30 | 1 | 100.00 | +36.91 |\n| 30-40 | 2 | 75.00 | -25.00 |\n\n"
                                           "Spearman correlation of completion tokens and window nDCG@10: rho = -0.866 "
                                           "(p = 0.333, n = 3).\n")
    assert len(length_report(load_suite(suite_dir), ["d1"])[1]) == 20


def test_the_length_report_of_equal_scores_has_no_correlation(suite_dir):
    text, _ = length_report(load_suite(suite_dir), ["d2"], 2)
    assert text == HEAD.format("d2", 2) + ("| 5.00-5.50 | 1 | 100.00 | +36.91 |\n| 5.50-6.00 | 1 | 100.00 | +36.91 |\n\n"
                                           "Spearman correlation of completion tokens and window nDCG@10: undefined "
                                           "(every window has the same completion length or the same score).\n")


@pytest.mark.parametrize(("tokens", "first"), [((0, 2), "0-1"), ((7, 7), "6.50-7.00")])
def test_bins_of_one_token_or_more_are_printed_whole(tmp_path, monkeypatch, tokens, first):
    monkeypatch.setattr(analyses, "suite_window_scores", lambda suite, datasets: [score(t, 0.0, 1.0) for t in tokens])
    text, _ = length_report(SuiteResult(tmp_path, {"label": "m"}, {}, {}), ["d"], 2)
    assert f"\n| {first} | " in text


def test_pass_curves_replay_each_number_of_passes(suite_dir):
    # q1 (q2 is not judged), relevant b and z (z not retrieved; ideal DCG 1 + R): b 2nd, 1st, 3rd
    curves = pass_curves(load_suite(suite_dir))
    assert curves.keys() == {"d1", "d2"}
    assert curves["d1"] == pytest.approx([R / (1 + R), 1 / (1 + R), 0.5 / (1 + R)], abs=1e-4)
    assert pass_curves(SuiteResult(suite_dir, {}, {"d2": load_suite(suite_dir).datasets["d2"]}, {})) == {
        "d2": pytest.approx([(R + 1 / math.log2(4)) / (1 + R), 1.0], abs=1e-4)}  # one pass by default


def test_the_passes_report():
    suite = SuiteResult(Path("s"), {"label": "m"}, {}, {})
    assert analyses.passes_report(suite, {"x": [0.1, 0.2, 0.3], "y": [0.5, 0.25]}) == (
        "# nDCG@10 after several reranking passes (m)\n\nnDCG@10 x 100 after 0..P passes of the window schedule, "
        "replayed from one P-pass run.\n\n| Dataset | 0 (BM25) | 1 | 2 |\n| --- | ---: | ---: | ---: |\n"
        "| x | 10.00 | 20.00 | 30.00 |\n| y | 50.00 | 25.00 |\n")


def finished(path, prompt, scores, skipped=None):
    return SuiteResult(path, {"template": prompt}, {d: DatasetResult(d, metrics(s)) for d, s in scores.items()},
                       skipped or {})


PUBLISHED = ("## Published: Table 4: reasoning activated (rearank prompt) vs. disactivated (zero-shot prompt), averages\n\n"
             "| Model | Reasoning | TREC-DL (Avg) | BEIR (Avg) | BRIGHT (Avg) |\n| --- | --- | ---: | ---: | ---: |\n"
             "| Rearank-7B | yes | 72.0 | 54.6 | 17.7 |\n| Rearank-7B | no | 68.2 | 52.9 | 16.4 |\n"
             "| Qwen2.5-7B | base | 65.5 | 50.1 | 15.0 |\n")


@pytest.mark.parametrize("switch", [False, True])
def test_the_reasoning_report_compares_the_shared_datasets(switch):
    on = finished(Path("on"), "rearank", {"dl19": 0.7, "beir-nfcorpus": 0.4, "dl20": 0.6}, {"bright-biology": "why"})
    off = finished(Path("off"), "rankgpt", {"dl19": 0.65, "beir-nfcorpus": 0.41})
    how = ", thinking switched on and off through the chat template (`enable_thinking`)." if switch else "."
    assert analyses.reasoning_report(on, off, "m", switch) == (
        "# Reasoning on and off (m)\n\nnDCG@10 x 100 with the reasoning prompt (`rearank`, on) and the zero-shot prompt "
        f"(`rankgpt`, off){how}\n\n| Dataset | Reasoning | Zero-shot | Delta |\n| --- | ---: | ---: | ---: |\n"
        "| dl19 | 70.00 | 65.00 | +5.00 |\n| beir-nfcorpus | 40.00 | 41.00 | -1.00 |\n"
        "| TREC-DL (Avg) | 70.00 (1/2) | 65.00 (1/2) | — |\n| BEIR (Avg) | 40.00 (1/7) | 41.00 (1/7) | — |\n\n"
        "- skipped `bright-biology`: why\n\n" + PUBLISHED)


def test_the_switch_is_off_by_default():
    on = finished(Path("on"), "rearank", {})
    assert "(`rankgpt`, on).\n" in analyses.reasoning_report(on, finished(Path("on"), "rankgpt", {}), "m")


class Tokenizers:
    """Stands in for transformers' AutoTokenizer and the model resolver: records the calls, or raises."""

    def __init__(self, monkeypatch, template="{% if enable_thinking %}{% endif %}", error=None):
        from rearank.backends import models

        self.calls, self.template, self.error = [], template, error
        module = ModuleType("transformers")
        module.AutoTokenizer = SimpleNamespace(from_pretrained=self.load)
        monkeypatch.setitem(sys.modules, "transformers", module)
        monkeypatch.setattr(models, "resolve_model", lambda name: SimpleNamespace(path=f"/m/{name}", gguf_file="g"))

    def load(self, path, gguf_file):
        self.calls.append((path, gguf_file))
        if self.error:
            raise self.error
        return SimpleNamespace(**({} if self.template is None else {"chat_template": self.template}))


def switch(mode, backend="hf"):
    return analyses.uses_thinking_switch(argparse.Namespace(thinking_switch=mode, backend=backend, model="qwen"))


@pytest.mark.parametrize("backend", ["hf", "vllm", "vllm-async"])  # each declares LOCAL_MODEL
def test_auto_reads_the_local_models_chat_template(monkeypatch, backend):
    tokenizers = Tokenizers(monkeypatch)
    assert switch("auto", backend) and tokenizers.calls == [("/m/qwen", "g")]
    tokenizers.template = "{{ messages }}"
    assert not switch("auto", backend)
    assert switch("on", "openai") and not switch("off")


@pytest.mark.parametrize("error", [ImportError("no transformers"), OSError("no file"), ValueError("bad")])
def test_an_unreadable_template_asks_for_the_switch(monkeypatch, error):
    Tokenizers(monkeypatch, error=error)
    with pytest.raises(RearankError) as caught:
        switch("auto")
    assert str(caught.value) == (f"--thinking-switch auto: cannot read the chat template of 'qwen' ({error}); pass "
                                 "--thinking-switch on or off")


def run_main(capsys, *argv):
    code = analyses.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_length_command_writes_the_report_and_plot(suite_dir, plots, capsys):
    assert run_main(capsys, "length", suite_dir, "--bins", "2", "--dataset", "d1") == (
        0, [str(suite_dir / "reasoning_length.md"), str(suite_dir / "reasoning_length.png")], "")
    assert (suite_dir / "reasoning_length.md").read_text() == length_report(load_suite(suite_dir), ["d1"], 2)[0]
    assert plots == [(length_report(load_suite(suite_dir), ["d1"], 2)[1], "m: d1", suite_dir / "reasoning_length.png")]
    plots.clear()
    assert run_main(capsys, "length", suite_dir)[0] == 0  # every finished dataset, 20 bins
    assert [(len(bins), title) for bins, title, _ in plots] == [(20, "m: d1, d2")]
    assert "\nDatasets: d1, d2; 5 windows with" in (suite_dir / "reasoning_length.md").read_text()


def test_length_command_names_what_is_not_finished(suite_dir, tmp_path, capsys):
    assert run_main(capsys, "length", suite_dir, "--dataset", "d1", "--dataset", "d9") == (
        2, [], f"benchmark.analyses: error: {suite_dir}: no finished dataset d9 to analyse\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "suite.json").write_text(json.dumps({"datasets": []}))
    message = f"benchmark.analyses: error: {empty}: no finished dataset  to analyse\n"  # no name: two spaces
    assert run_main(capsys, "length", empty) == (2, [], message)


def test_passes_command_runs_three_passes_by_default(suite_dir, plots, monkeypatch, capsys, tmp_path):
    asked = []
    monkeypatch.setattr(benchmark.run, "run_suite", lambda args: asked.append(args) or load_suite(suite_dir))
    out = tmp_path / "out"
    out.mkdir()
    assert run_main(capsys, "passes", "--suite", "x", "--backend", "oracle", "--output-dir", out) == (
        0, [str(out / "passes.md"), str(out / "passes.png")], "")
    curves = pass_curves(load_suite(suite_dir))
    assert asked[0].passes == 3 and plots == [(curves, "m", out / "passes.png")]
    assert (out / "passes.md").read_text() == analyses.passes_report(load_suite(suite_dir), curves)


def test_passes_command_without_a_finished_dataset(tmp_path, plots, monkeypatch, capsys):
    monkeypatch.setattr(benchmark.run, "run_suite", lambda args: SuiteResult(args.out, {}, {}, {}))
    assert run_main(capsys, "passes", "--suite", "x", "--backend", "oracle", "--output-dir", tmp_path) == (
        2, [], f"benchmark.analyses: error: no dataset of 'x' finished; see {tmp_path / 'report.md'}\n")
    assert plots == []


def test_reasoning_command_runs_both_prompts_and_writes_the_comparison(tmp_path, monkeypatch, capsys):
    runs = []

    def run_suite(args):
        runs.append((args.template, args.out, args.label, args.backend_option))
        return finished(args.out, args.template, {"dl19": 0.5})

    monkeypatch.setattr(benchmark.run, "run_suite", run_suite)
    assert run_main(capsys, "reasoning", "--suite", "dl19", "--model", "qwen", "--backend", "openai", "--output-dir",
                    tmp_path) == (0, [str(tmp_path / "reasoning.md")], "")
    assert runs == [("rearank", tmp_path / "reasoning", "qwen reasoning", []),
                    ("rankgpt", tmp_path / "zero-shot", "qwen zero-shot", [])]  # auto: an openai server has no switch
    on, off = (finished(tmp_path / m, p, {"dl19": 0.5}) for m, p in (("reasoning", "rearank"), ("zero-shot", "rankgpt")))
    assert (tmp_path / "reasoning.md").read_text() == analyses.reasoning_report(on, off, "qwen")


def test_reasoning_command_labels_by_the_backend_without_a_model(tmp_path, monkeypatch, capsys):
    labels = []
    monkeypatch.setattr(benchmark.run, "run_suite", lambda args: labels.append(args.label) or finished(args.out, "p", {}))
    assert run_main(capsys, "reasoning", "--suite", "dl19", "--backend", "oracle", "--thinking-switch", "off",
                    "--output-dir", tmp_path)[0] == 0
    assert labels == ["oracle reasoning", "oracle zero-shot"]
    with pytest.raises(SystemExit):
        analyses.main(["reasoning", "--suite", "dl19", "--output-dir", str(tmp_path), "--thinking-switch", "maybe"])
    assert "invalid choice: 'maybe' (choose from 'auto', 'on', 'off')" in capsys.readouterr().err


def test_the_initial_orders_are_the_runs_top_k(suite_dir):
    assert analyses._initial_orders(load_suite(suite_dir), "d1") == {"q1": list("abcd"), "q2": list("vwxy")}


def test_a_window_of_no_passage_is_left_out():
    assert window_scores("ab", [trace("q", 1, 1, (), 9)], {"a": 1}) == []


@pytest.mark.parametrize(("tokens", "correlation"), [
    ((5, 5, 9), "rho = 0.866 (p = 0.333, n = 3)"),  # ranks 1.5, 1.5, 3 against 1, 2, 3
    ((7, 7, 7), "undefined (every window has the same completion length or the same score)"),
])
def test_the_correlation_needs_two_lengths_and_two_scores(tmp_path, monkeypatch, tokens, correlation):
    scores = [score(t, 0.0, after) for t, after in zip(tokens, (0.5, 0.6, 1.0))]
    monkeypatch.setattr(analyses, "suite_window_scores", lambda suite, datasets: scores)
    text, _ = length_report(SuiteResult(tmp_path, {"label": "m"}, {}, {}), ["d"], 2)
    assert text.endswith(f"nDCG@10: {correlation}.\n")


def test_the_help_names_every_command_and_option(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "200")
    texts = {}
    for command in ([], ["reasoning"], ["length"]):
        with pytest.raises(SystemExit):
            analyses.main([*command, "--help"])
        texts[" ".join(command)] = " ".join(capsys.readouterr().out.split())
    assert texts[""].startswith("usage: python -m benchmark.analyses [-h] {reasoning,passes,length} ... The paper's "
                                "analyses: reasoning on/off (Table 4), reasoning length (Figure 6), several passes "
                                "(Figure 7). positional arguments:")
    for words in ["reasoning same model with the reasoning and the zero-shot prompt (Table 4)",
                  "passes nDCG@10 after 1..P reranking passes (Figure 7)",
                  "length reasoning length vs. window nDCG@10 of a finished suite (Figure 6)"]:
        assert words in texts[""], words
    assert ("--thinking-switch {auto,on,off} also switch the chat template's enable_thinking (auto: when the hf/vllm "
            "model's template has it)") in texts["reasoning"]
    for words in ["results suite result folder", "--dataset DATASET dataset(s) to pool (default: every finished one)",
                  "--bins BINS equal-width bins of completion tokens"]:
        assert words in texts["length"], words


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit):
        analyses.main([])
    assert capsys.readouterr().err.endswith("error: the following arguments are required: analysis\n")


def test_auto_switches_thinking_for_a_local_model_that_has_it(tmp_path, monkeypatch, capsys):
    Tokenizers(monkeypatch)
    options = []
    monkeypatch.setattr(benchmark.run, "run_suite",
                        lambda args: options.append(args.backend_option) or finished(args.out, "p", {}))
    assert run_main(capsys, "reasoning", "--suite", "dl19", "--model", "qwen", "--output-dir", tmp_path)[0] == 0
    assert options == [["enable_thinking=true"], ["enable_thinking=false"]]  # the hf backend by default
    assert "zero-shot prompt (`p`, " + str(tmp_path / "zero-shot") + "), thinking switched on and off" in (
        tmp_path / "reasoning.md").read_text()


def test_a_tokenizer_without_a_chat_template_has_no_switch(monkeypatch):
    Tokenizers(monkeypatch, template=None)
    assert not switch("auto")


def test_every_unfinished_dataset_is_named(suite_dir, capsys):
    assert run_main(capsys, "length", suite_dir, "--dataset", "d8", "--dataset", "d9")[2] == (
        f"benchmark.analyses: error: {suite_dir}: no finished dataset d8, d9 to analyse\n")
