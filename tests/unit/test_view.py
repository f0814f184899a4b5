"""The trace viewer's page data: escaping, undoing/replaying windows, lazy window blocks, CLI errors."""

import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rearank.cli import main
from rearank.methods.listwise.answer import apply_permutation
from rearank.methods.listwise.window import schedule
from rearank.types import WindowTrace
from rearank.view import ViewInput, render, replay, undo_windows


def trace(qid, start, end, permutation, raw="<think>x</think><answer>[1]</answer>", status="ok"):
    return WindowTrace(qid=qid, start=start, end=end, pass_index=0, prompt_tokens=10, completion_tokens=5,
                       raw_output=raw, permutation=tuple(permutation), status=status, latency_s=0.1)


def blocks(page):
    """The JSON blocks of a page: meta and one window list per query."""
    meta = json.loads(re.search(r'<script type="application/json" id="meta">(.*?)</script>', page).group(1))
    windows = re.findall(r'<script type="application/json" id="w(\d+)">(.*?)</script>', page)
    return meta, {int(i): json.loads(text) for i, text in windows}


@settings(deadline=None, max_examples=50)
@given(n=st.integers(2, 40), seed=st.integers(0, 10**6))
def test_undoing_the_windows_of_a_listwise_run_gives_back_the_first_stage(n, seed):
    rng = random.Random(seed)
    first = [f"d{i}" for i in range(n)]
    order, traces = list(first), []
    for start, end in schedule(n, 6, 3, passes=2):
        permutation = list(range(end - start))
        rng.shuffle(permutation)
        order[start:end] = apply_permutation(order[start:end], permutation)
        traces.append(trace("q", start, end, permutation))
    assert undo_windows(order, traces) == first
    shown, replayed = replay(first, traces)
    assert replayed == order and [len(w) for w in shown] == [t.end - t.start for t in traces]


def test_model_text_is_escaped_and_windows_map_to_the_passages_they_showed():
    evil = '</script><script>alert(1)</script><!-- & "'
    # first stage a b c d; window (0, 4) answers [3] > [1] > [2] > [4] -> final c a b d
    traces = {"q1": [trace("q1", 0, 4, (2, 0, 1, 3), raw=evil)]}
    data = ViewInput(run={"q1": ["c", "a", "b", "d"], "q2": ["x"]}, traces=traces,
                     first_stage={"q1": ["a", "b", "c", "d"], "q2": ["x"]}, topics={"q1": "<b>query</b>"},
                     docs={"c": ("", "passage <i>c</i>")}, qrels={"q1": {"c": 2, "a": 0}}, title="t<script>")
    page = render(data)
    assert evil not in page and "<script>alert" not in page and "<b>query" not in page
    assert "<title>t&lt;script&gt;</title>" in page
    meta, windows = blocks(page)
    assert windows[0][0]["raw"] == evil  # the exact text comes back through JSON.parse
    assert windows[0][0]["docids"] == [["a", 0], ["b", None], ["c", 2], ["d", None]]  # presented order, relevance
    assert windows[1] == []
    q1 = meta["queries"][0]
    assert q1["final"][:2] == [["c", 2], ["a", 0]] and q1["first_rank"]["c"] == 3 and q1["final_rank"]["a"] == 2
    # nDCG@10 of q1 before: a(0) b(-) c(2) d(-): (2^2-1)/log2(4) = 1.5; ideal 3 -> 0.5; after: c first -> 1.0
    assert q1["ndcg_before"] == pytest.approx(0.5) and q1["ndcg_after"] == pytest.approx(1.0)
    assert meta["passages"] == {"c": {"title": "", "text": "passage <i>c</i>"}}


def test_traces_that_do_not_replay_on_the_first_stage_are_shown_without_passage_ids():
    traces = {"q": [trace("q", 0, 3, (2, 1, 0))]}  # replays to c b a, but the run says b a c
    meta, windows = blocks(render(ViewInput(run={"q": ["b", "a", "c"]}, traces=traces,
                                            first_stage={"q": ["a", "b", "c"]})))
    assert windows[0][0]["docids"] is None and meta["queries"][0]["mapped"] is False


def test_cli_view_writes_the_page_and_refuses_to_overwrite_an_input(tmp_path, capsys):
    run = tmp_path / "run.trec"
    run.write_text("q 0 b 1 2 t\nq 0 a 2 1 t\n")
    (tmp_path / "run.trec.traces.jsonl").write_text(json.dumps({**trace("q", 0, 2, (1, 0)).__dict__,
                                                                "permutation": [1, 0]}) + "\n")
    assert main(["view", str(run)]) == 0
    meta, windows = blocks((tmp_path / "run.trec.html").read_text())
    assert meta["first_stage_label"] == "First stage (recovered from the traces)"
    assert meta["queries"][0]["first"] == [["a", None], ["b", None]] and windows[0][0]["docids"]
    assert main(["view", str(run), "--output", str(run)]) == 2
    assert f"--output {run} is the input RUN;" in capsys.readouterr().err
    (tmp_path / "page.html").symlink_to(tmp_path / "run.trec.traces.jsonl")  # the traces RUN implies, by a link
    assert main(["view", str(run), "--output", str(tmp_path / "page.html")]) == 2
    assert "is the input --traces;" in capsys.readouterr().err
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    assert main(["view", str(run), "--traces", str(tmp_path / "bad.jsonl")]) == 2
    assert "bad.jsonl:1: not a window trace" in capsys.readouterr().err
    assert main(["view", str(tmp_path / "absent.trec")]) == 2
    assert "run file not found" in capsys.readouterr().err


def test_cli_view_refuses_a_dataset_the_run_was_not_made_from(tmp_path, capsys):
    # `rearank view RUN --dataset OTHER` wrote a page of empty queries and no passages, rc 0
    run = tmp_path / "run.trec"
    run.write_text("q1 Q0 b 1 2 t\nq1 Q0 a 2 1 t\n")
    topics, docs = tmp_path / "topics.tsv", tmp_path / "docs.tsv"
    topics.write_text("other\tanother dataset's query\n")
    docs.write_text("x\tanother dataset's passage\n")
    assert main(["view", str(run), "--topics", str(topics), "--docs", str(docs)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"rearank view: error: {run}: none of its 1 queries (first: 'q1') is in {topics} (the "
                           "given files); pass the dataset or --topics the run was made from")
    topics.write_text("q1\tthe run's query\n")
    assert main(["view", str(run), "--topics", str(topics), "--docs", str(docs)]) == 2
    assert "none of the passages it ranks is in" in capsys.readouterr().err
    assert not (tmp_path / "run.trec.html").exists()
    docs.write_text("a\tthe run's passage\n")
    assert main(["view", str(run), "--topics", str(topics), "--docs", str(docs)]) == 0
    assert (tmp_path / "run.trec.html").is_file()
