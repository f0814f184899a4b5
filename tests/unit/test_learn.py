"""recipes/learn (``make train-learn``): the one-action reward, the two tasks' windows, what the report measures,
and the Hydra override merge the GRPO stage relies on."""

import gzip
import json

import numpy as np
import pytest

from rearank.types import Candidate, Query, Request
from recipes.checks.cpu import merge_overrides
from recipes.learn import report
from recipes.learn.lexical import BM25, overlap, unique_best
from recipes.learn.reward import compute_score
from recipes.learn.run import earlier_attempts, sft_examples
from recipes.learn.windows import PHRASE_WORDS, balanced_order, heldout, lexical_windows, windows
from tests.conftest import require

TRUTH = json.dumps({"labels": [0, 2, 0, 1]})


@pytest.mark.parametrize(("answer", "score", "valid", "first"), [
    ("[2]", 1.0, 1.0, 1),  # the best passage
    ("  [ 2 ]\n", 1.0, 1.0, 1),
    ("[4]", 0.0, 1.0, 3),  # relevant, not the best: one id, wrong
    ("[1]", 0.0, 1.0, 0),
    ("[2] > [4]", -1.0, 0.0, -1),  # two ids: not the action asked for
    ("[5]", -1.0, 0.0, -1),  # out of range
    ("passage two", -1.0, 0.0, -1),  # no id
    ("<answer>[2]", -1.0, 0.0, -1),  # unclosed answer: truncated
    (None, -1.0, 0.0, -1),
])
def test_reward_prices_one_id(answer, score, valid, first):
    parts = compute_score("learn/phrase/dl19", answer, TRUTH)
    assert (parts["score"], parts["valid"], parts["first"]) == (score, valid, first)
    assert parts["top1"] == float(score == 1.0)
    assert parts["relevant"] == 1.0


def test_reward_ndcg_is_of_the_repaired_permutation():
    # "[4]" -> permutation 4,1,2,3: grades 1,0,2,0; linear gains (trec_eval's nDCG): DCG 1/log2(2) + 2/log2(4),
    # ideal (2,1,0,0) 2/log2(2) + 1/log2(3)
    dcg = 1.0 + 2.0 / 2.0
    ideal = 2.0 + 1.0 / np.log2(3)
    assert compute_score("x", "[4]", TRUTH)["ndcg"] == pytest.approx(dcg / ideal)


def test_reward_refuses_a_ground_truth_it_cannot_read():
    with pytest.raises(ValueError, match="ground truth"):
        compute_score("x", "[1]", "not json")


def request(qid, texts):
    return Request(Query(qid, f"topic {qid}"), [Candidate(f"{qid}-d{i}", 1.0, t) for i, t in enumerate(texts)])


WORDS = [f"alpha{i} beta{i} gamma{i} delta{i} epsilon{i} zeta{i} eta{i} theta{i}" for i in range(12)]


def test_phrase_windows_end_the_target_with_the_query_only():
    rows = list(windows("phrase", "dl21", [request("q1", WORDS), request("q2", WORDS)], {}, 4, seed=3, size=4))
    assert len(rows) == 8
    assert [r["extra_info"]["target"] for r in rows] == [1, 2, 3, 4, 1, 2, 3, 4]  # positions cycle
    for row in rows:
        labels = json.loads(row["reward_model"]["ground_truth"])["labels"]
        target = row["extra_info"]["target"]
        assert labels == [int(k == target) for k in range(1, 5)]
        text = row["prompt"][-1]["content"]
        query = text.rsplit("\n", 1)[1].removeprefix("Search query: ")  # the query comes last
        assert len(query.split()) == PHRASE_WORDS
        shown = [line for line in text.splitlines() if line.endswith("]")]  # "<passage> [k]", k = 1..4 in order
        assert [line.rsplit(" ", 1)[1] for line in shown] == ["[1]", "[2]", "[3]", "[4]"]
        # the target's words end with the query, right before its id; no other passage holds the query
        assert [line.endswith(f"{query} [{k}]") for k, line in enumerate(shown, 1)] == [k == target for k in range(1, 5)]
        assert sum(query in line for line in shown) == 1
        assert row["data_source"] == "learn/phrase/dl21"


def test_phrase_windows_skip_a_target_whose_last_words_another_passage_holds():
    shared = "one two three four"
    texts = [f"first {shared}", f"second {shared} more", "third x y z w", "fourth p q r s"]
    rows = list(windows("phrase", "dl21", [request("q1", texts)], {}, 8, seed=0, size=4))
    queries = [r["prompt"][-1]["content"].rsplit("Search query: ", 1)[1] for r in rows]
    assert 0 < len(rows) < 8  # the draws whose target was the first passage were skipped
    assert shared not in queries and "r s" in " ".join(queries)


def test_relevance_windows_hold_one_relevant_and_three_judged_zero():
    texts = [f"passage number {i} about something" for i in range(8)]
    qrels = {"q1": {"q1-d0": 3, "q1-d1": 0, "q1-d2": 0, "q1-d3": 0, "q1-d4": 1}}  # d4 grade 1: never used
    rows = list(windows("relevance", "dl19", [request("q1", texts), request("q2", texts)], qrels, 5, seed=0, size=4))
    assert len(rows) == 5  # q2 has no judgments
    for k, row in enumerate(rows):
        labels = json.loads(row["reward_model"]["ground_truth"])["labels"]
        assert labels == [3 if i == k % 4 else 0 for i in range(4)]
        assert "Search query: topic q1" in row["prompt"][-1]["content"]


class DigitTokenizer:
    """Encodes an answer ``[k]`` as the one token ``k``; every prompt as two tokens."""

    eos_token_id = 0

    def encode(self, text, add_special_tokens=False):
        return [int(text.strip("[]"))]

    def apply_chat_template(self, messages, **kwargs):
        return {"input_ids": [9, 9]}


def test_sft_targets_are_right_at_the_asked_rate_and_balanced():
    rows = [{"prompt": [{"role": "user", "content": "x"}], "extra_info": {"target": 1 + i % 4}} for i in range(4000)]
    examples = sft_examples(rows, DigitTokenizer(), right=0.5, seed=0, size=4)
    targets = [answer[0] for _, answer in examples]
    right = sum(t == r["extra_info"]["target"] for t, r in zip(targets, rows))
    assert 0.47 < right / 4000 < 0.53
    assert all(0.23 < targets.count(k) / 4000 < 0.27 for k in range(1, 5))
    assert all(answer[-1] == 0 for _, answer in examples)  # each answer ends with the end-of-sequence token


def shown_lines(row):
    return [line for line in row["prompt"][-1]["content"].splitlines() if line.endswith("]")]


LONG = [f"word{i} " * 3 + f"term{i} alpha beta gamma delta epsilon" for i in range(12)]


def test_relevance_windows_cut_passages_to_six_words_and_put_the_query_after_them():
    qrels = {"q1": {f"q1-d{i}": (2 if i < 2 else 0) for i in range(12)}}
    rows = list(windows("relevance", "dl19", [request("q1", LONG)], qrels, 4, seed=0, size=4))
    for row in rows:
        text = row["prompt"][-1]["content"]
        assert text.rstrip().endswith("Search query: topic q1")  # the query comes last
        assert text.index("Search query") > text.index("[4]")
        assert [len(line.split()) for line in shown_lines(row)] == [7] * 4  # six words and the id
        assert row["extra_info"]["shown"] == [line.rsplit(" ", 1)[0] for line in shown_lines(row)]


def test_heldout_builds_one_window_per_relevant_passage_with_balanced_positions():
    texts = [f"passage {i} text" for i in range(10)]
    qrels = {"q1": {f"q1-d{i}": (3 if i < 5 else 0) for i in range(10)},
             "q2": {f"q2-d{i}": (2 if i < 3 else 0) for i in range(10)}}
    rows = heldout("dl19", [request("q1", texts), request("q2", texts)], qrels, 8, seed=1, size=4)
    assert [r["extra_info"]["target"] for r in rows] == [1, 2, 3, 4, 1, 2, 3, 4]
    relevant = [(r["extra_info"]["qid"], r["extra_info"]["shown"][r["extra_info"]["target"] - 1]) for r in rows]
    assert len(set(relevant)) == 8  # 8 of the 5 + 3 relevant passages, none twice
    for row in rows:
        labels = json.loads(row["reward_model"]["ground_truth"])["labels"]
        assert sorted(labels)[:3] == [0, 0, 0] and labels.index(max(labels)) + 1 == row["extra_info"]["target"]


def test_heldout_says_how_many_relevant_passages_there_are():
    from rearank.errors import RearankError

    texts = [f"passage {i}" for i in range(6)]
    qrels = {"q1": {f"q1-d{i}": (2 if i < 2 else 0) for i in range(6)}}
    with pytest.raises(RearankError, match="dl19: 2 relevant passages .* 3 held-out windows asked; lower --heldout"):
        heldout("dl19", [request("q1", texts)], qrels, 3, seed=0, size=4)


def test_the_lexical_labeller_needs_a_unique_highest_overlap():
    assert overlap("solar panel cost", ["the solar panel", "cost of a panel", "panel", "cats"]) == [2, 2, 1, 0]
    assert unique_best([2, 2, 1, 0]) is None and unique_best([0, 3, 1, 0]) == 1 and unique_best([0, 0, 0, 0]) is None


def test_lexical_windows_label_the_top_overlap_balance_positions_and_borrow_negatives():
    topics = ["solar power", "river fish", "mountain bike", "coffee beans"]
    requests = [Request(Query(f"q{k}", topic), [Candidate(f"q{k}-d{i}", 1.0, f"{topic if i % 2 else 'other'} "
                                                                            f"text {k}-{i}")
                                               for i in range(8)]) for k, topic in enumerate(topics)]
    rows = list(lexical_windows("dl21", requests, 16, seed=0, size=4))
    assert len(rows) >= 40
    targets = [r["extra_info"]["target"] for r in rows]
    assert targets == [1 + i % 4 for i in range(len(rows))]  # positions cycle
    foreign = mine = 0
    for row in rows:
        info = row["extra_info"]
        scores = overlap(info["query"], info["shown"])
        assert unique_best(scores) == info["target"] - 1  # the label is the unique top overlap
        assert json.loads(row["reward_model"]["ground_truth"])["labels"] == [int(k == info["target"]) for k in
                                                                             range(1, 5)]
        own = {" ".join(c.text.split()[:6]) for c in requests[int(info["qid"][1:])].candidates}
        for k, text in enumerate(info["shown"]):
            if k != info["target"] - 1:
                foreign += text not in own
                mine += text in own
    assert 0.35 < foreign / (foreign + mine) < 0.65  # about half the negatives from other queries


def test_balanced_order_puts_each_position_once_in_every_four_rows():
    rows = [{"extra_info": {"target": t, "n": i}} for i, t in enumerate([1, 1, 1, 2, 2, 3, 3, 3, 4, 4, 4, 4])]
    ordered = balanced_order(rows, seed=0, size=4)
    assert len(ordered) == 8  # two full rounds: position 2 has only two rows
    assert [r["extra_info"]["target"] for r in ordered] == [1, 2, 3, 4] * 2


def outcome(answer, gold, item=0, qid="q"):
    return {"item": item, "qid": qid, "gold": gold, "answer": answer, "right": answer == gold, "greedy_agrees": True}


def scored(first, relevant):
    valid = first >= 0
    top1 = valid and first == relevant
    return {"first": float(first), "valid": float(valid), "score": 1.0 if top1 else 0.0 if valid else -1.0}


def test_figures_name_the_answer_share_and_the_accuracy_per_gold_position():
    # answers 1, 1, 3, 3 to items whose best passage is at 1, 2, 3, 4
    fig = report.figures("grpo", 5, [outcome(1, 1), outcome(1, 2), outcome(3, 3), outcome(3, 4)], size=4)
    assert "top1_by_position" not in fig  # it was the share of answers, named like an accuracy
    assert fig["answer_share_by_position"] == {"1": 0.5, "2": 0.0, "3": 0.5, "4": 0.0}
    assert fig["accuracy_by_position"] == {"1": 1.0, "2": 0.0, "3": 1.0, "4": 0.0}
    assert (fig["top1"], fig["items"], fig["greedy_agrees"]) == (0.5, 4, 1.0)


def test_gate_passes_and_fails_on_each_threshold():
    spread = [[scored(0, 0), scored(1, 0)], [scored(2, 2), scored(3, 2)], [scored(1, 1), scored(2, 1)]]
    balanced = [outcome(k % 4 + 1, 1) for k in range(8)]
    assert report.gate(spread, balanced, size=4)["passed"]
    flat = [[scored(0, 0), scored(0, 0)]] + spread  # 1 of 4 groups without spread: 0.25 <= 0.3
    assert report.gate(flat, balanced, size=4)["zero_spread"] == 0.25 and report.gate(flat, balanced, size=4)["passed"]
    assert not report.gate([[scored(0, 0), scored(0, 0)]] * 2 + spread, balanced, size=4)["passed"]  # 2 of 5: 0.4
    assert not report.gate(spread, [outcome(1, 1)] * 4 + balanced, size=4)["passed"]  # position 1: 6 of 12 = 0.5
    assert not report.gate([[scored(-1, 0), scored(1, 0)]] * 3, balanced, size=4)["passed"]  # format 0.5


def test_paired_runs_mcnemar_on_items_and_the_query_flip_on_queries():
    before = [outcome(2, 1, item=i, qid=f"q{i % 3}") for i in range(12)]  # all wrong
    after = [outcome(1, 1, item=i, qid=f"q{i % 3}") for i in reversed(range(12))]  # all right, another order
    test = report.paired(before, after, "start", "end")
    assert (test["items"], test["queries"], test["gain"]) == (12, 3, 1.0)
    assert test["only_candidate_right"] == 12 and test["only_baseline_right"] == 0
    assert test["per_item"]["p_value"] == pytest.approx(2 / 2 ** 12)
    assert test["per_query"]["p_value"] == pytest.approx(2 / 2 ** 3)  # three queries: 2 of 8 sign patterns


def test_paired_refuses_duplicate_items():
    with pytest.raises(ValueError, match="share one item"):
        report.paired([outcome(1, 1), outcome(2, 1)], [outcome(1, 1)], "a", "b")


def window(query, shown, target):
    return {"extra_info": {"query": query, "shown": shown, "target": target}}


def test_baselines_score_constant_positions_overlap_and_bm25_on_the_shown_words():
    rows = [window("solar panel cost", ["solar panel cost today", "wind farm", "cost of solar", "the cat"], 1),
            window("river fish", ["sea birds", "river fish species", "river boats", "fish and chips"], 2),
            window("red car", ["blue sky", "green tree", "a car", "a red car"], 4),
            window("moon", ["sun", "stars", "sky", "sea"], 3)]  # no overlap anywhere: a four-way tie
    result = report.baselines(rows, size=4)
    assert result["constant_position"] == {"1": 0.25, "2": 0.25, "3": 0.25, "4": 0.25}
    assert result["best_constant"] == 0.25
    assert result["query_term_overlap"] == pytest.approx((1 + 1 + 1 + 0.25) / 4)
    assert result["bm25_on_shown_words"] == pytest.approx((1 + 1 + 1 + 0.25) / 4)


def test_bm25_prefers_the_rarer_query_term():
    bm25 = BM25(["apple pie", "apple tart", "apple cake", "banana bread"])
    scores = bm25.scores("apple banana", ["apple pie", "banana bread"])
    assert scores[1] > scores[0] > 0


def test_the_plan_lists_its_evaluation_steps_and_what_a_run_misses():
    planned = report.plan("relevance", {"grpo_steps": 56, "eval_every": 14, "lr": 5e-6})
    assert planned["evaluation_steps"] == [0, 14, 28, 42, 56] and planned["settings"]["lr"] == 5e-6
    assert report.plan("relevance", {"grpo_steps": 10, "eval_every": 4})["evaluation_steps"] == [0, 4, 8, 10]
    assert report.missing(planned, [0, 14, 28, 42, 56]) == []
    assert report.missing(planned, [0, 14, 28]) == [42, 56]


def evaluations(steps):
    return [report.figures("base", 0, [outcome(3, 1)] * 4, size=4),
            report.figures("warm start", 0, [outcome(1, 1), outcome(1, 2), outcome(3, 3), outcome(4, 4)], size=4),
            *[report.figures("grpo", s, [outcome(k, k) for k in (1, 2, 3, 4)], size=4) for s in steps]]


LEXICAL = {"best_constant": 0.25, "query_term_overlap": 0.42, "bm25_on_shown_words": 0.40}
WON = {"items": 4, "queries": 4, "gain": 0.25, "only_candidate_right": 1, "only_baseline_right": 0,
       "per_item": {"p_value": 0.01}, "per_query": {"p_value": 0.02}}


def test_a_run_that_stopped_before_its_plan_is_marked_and_never_meets_the_target():
    planned = report.plan("relevance", {"grpo_steps": 56, "eval_every": 14})
    lines = report.verdict("relevance", planned, evaluations([14, 28, 42, 56]), WON, LEXICAL, size=4)
    assert "STOPPED" not in lines[0] and "target MET" in lines[-1]
    short = report.verdict("relevance", planned, evaluations([14, 28]), WON, LEXICAL, size=4)
    assert short[0].startswith("relevance: STOPPED BEFORE ITS PLAN: no evaluation at step(s) [42, 56]")
    assert "target NOT met" in short[-1]


def test_the_target_needs_both_tests_and_no_position_habit():
    planned = report.plan("relevance", {"grpo_steps": 14, "eval_every": 14})
    query_only = {**WON, "per_query": {"p_value": 0.2}}
    assert "target NOT met" in report.verdict("relevance", planned, evaluations([14]), query_only, LEXICAL, size=4)[-1]
    habit = [*evaluations([]), report.figures("grpo", 14, [outcome(1, 1)] * 3 + [outcome(1, 2)], size=4)]
    lines = report.verdict("relevance", planned, habit, WON, LEXICAL, size=4)
    assert "1.00 (ABOVE 0.5)" in lines[-2] and "target NOT met" in lines[-1]


def test_outcomes_are_written_compressed_one_per_line(tmp_path):
    rows = [{"task": "relevance", "stage": "grpo", "step": 2, "item": i, "qid": "q", "gold": 1, "answer": 2}
            for i in range(3)]
    report.write_outcomes(tmp_path / "o.jsonl.gz", rows)
    with gzip.open(tmp_path / "o.jsonl.gz", "rt") as handle:
        assert [json.loads(line) for line in handle] == rows


def test_zero_spread_is_counted_per_step(tmp_path):
    rows = {"1": [("a_0_0", 1.0), ("a_1_0", 0.0), ("b_0_0", -1.0), ("b_1_0", -1.0)], "2": [("c_0_0", 0.0)]}
    for step, dumped in rows.items():
        (tmp_path / f"{step}.jsonl").write_text("".join(json.dumps({"uid": u, "score": s}) + "\n" for u, s in dumped))
    assert report.zero_spread(tmp_path) == {1: 0.5, 2: 1.0}


def test_merge_overrides_replaces_keys_and_appends_new_ones():
    base = ["a.b=1", "++c.d='x'", "+e=2", "f=3"]
    merged = merge_overrides(base, ["c.d='y'", "a.b=5", "g=7"])
    assert merged == ["a.b=5", "c.d='y'", "+e=2", "f=3", "g=7"]


def fake_data(task, folder, args):
    return {"sft": [], "probe": [], "grpo": [], "held": []}


def test_a_saved_warm_start_made_with_other_settings_is_refused(tmp_path, monkeypatch):
    from rearank.errors import RearankError
    from recipes.learn import run

    built = []
    monkeypatch.setattr(run, "build_data", lambda *a: built.append(a) or fake_data(*a))
    args = run.build_parser().parse_args(["--out", str(tmp_path)])
    (tmp_path / "relevance" / "sft-model").mkdir(parents=True)
    (tmp_path / "relevance" / "sft-model" / "config.json").write_text("{}")
    saved = {key: getattr(args, key) for key in run.WARM_START_SETTINGS}
    (tmp_path / "relevance" / "warm_start.json").write_text(json.dumps({"settings": {**saved, "sft_steps": 99}}))
    kept = (tmp_path / "relevance" / "warm_start.json").read_bytes()
    with pytest.raises(RearankError, match=r"other settings: sft_steps 99 \(asked 48\); move .*relevance aside") as err:
        run.run_task("relevance", tmp_path, args, {})
    assert "seed" not in str(err.value)  # only the settings that differ are named
    assert (tmp_path / "relevance" / "warm_start.json").read_bytes() == kept  # the earlier attempt is left alone
    assert built == []  # refused before its data folder is rewritten


class _Inline:
    """A spawn context whose process runs its target here (exit code 0) or not at all (exit code ``fails``)."""

    def __init__(self, fails: int = 0):
        self.fails, self.started = fails, []

    def Process(self, target, args, name):
        context = self

        class Child:
            exitcode = None

            def start(self):
                context.started.append(name)
                if not context.fails:
                    target(*args)
                self.exitcode = context.fails

            def join(self):
                pass
        return Child()


def test_the_warm_start_runs_in_a_child_process_and_is_read_back(tmp_path, monkeypatch):
    from recipes.learn import run

    context = _Inline()
    monkeypatch.setattr(run.multiprocessing, "get_context", lambda method: context if method == "spawn" else None)
    monkeypatch.setattr(run, "build_data", fake_data)
    monkeypatch.setattr(report, "baselines", lambda rows, size: {})
    made = {"outcomes": {"base": [outcome(1, 2)], "warm start": [outcome(2, 2)]}, "gate": {"passed": False},
            "sft_steps_run": 8, "sft_checks": [], "sft_loss": [1.0], "times": {"sft_s": 1}}
    monkeypatch.setattr(run, "warm_start", lambda *a: dict(made))
    args = run.build_parser().parse_args(["--out", str(tmp_path)])
    entry, rows = run.run_task("relevance", tmp_path, args, {"evaluation_steps": [0]})
    assert context.started == ["relevance-warm-start"]
    saved = json.loads((tmp_path / "relevance" / "warm_start.json").read_text())
    assert saved["settings"] == {key: getattr(args, key) for key in run.WARM_START_SETTINGS}
    assert [(e["stage"], e["top1"]) for e in entry["evaluations"]] == [("base", 0.0), ("warm start", 1.0)]
    # what SFT alone did: the warm start paired with the base model on the same items
    assert entry["warm_start_test"]["gain"] == 1.0 and entry["warm_start_test"]["only_candidate_right"] == 1
    assert "GRPO not run" in entry["verdict"][0]
    assert [(r["stage"], r["answer"]) for r in rows] == [("base", 1), ("warm start", 2)]


def test_a_warm_start_process_that_fails_ends_the_task_with_one_line(tmp_path, monkeypatch):
    from rearank.errors import RearankError
    from recipes.learn import run

    monkeypatch.setattr(run.multiprocessing, "get_context", lambda method: _Inline(fails=1))
    monkeypatch.setattr(run, "build_data", fake_data)
    args = run.build_parser().parse_args(["--out", str(tmp_path)])
    with pytest.raises(RearankError, match="relevance: the warm start's process ended with exit code 1 and no "):
        run.run_task("relevance", tmp_path, args, {})


def test_the_warm_start_stops_at_the_first_check_that_says_so():
    torch = require("torch")
    transformers = require("transformers")
    from recipes.checks.sft import train_on_answers

    config = transformers.LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config)
    examples = [([1, 2, 3], [4, 5]), ([1, 3], [6, 5])]
    calls = []
    losses = train_on_answers(model, examples, 10, 1e-3, 2, 0, check=lambda step: calls.append(step) or step == 4,
                              every=2)
    assert calls == [2, 4] and len(losses) == 4
    assert len(train_on_answers(model, examples, 3, 1e-3, 2, 0)) == 3  # no check: every step runs


def test_grpo_runs_with_kl_balanced_batches_and_checkpoints_at_the_evaluation_steps(tmp_path):
    from recipes.learn import run

    overrides = set(run.grpo_overrides(tmp_path, run.build_parser().parse_args([])))
    assert {"actor_rollout_ref.actor.use_kl_loss=true", "actor_rollout_ref.actor.kl_loss_coef=0.01",
            "actor_rollout_ref.actor.kl_loss_type=low_var_kl", "data.train_batch_size=8",
            "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.optim.lr=5e-06", "data.shuffle=false",
            "trainer.save_freq=14", "actor_rollout_ref.actor.checkpoint.save_contents=['hf_model']",
            "trainer.test_freq=-1", "trainer.val_before_train=false"} <= overrides
    assert "actor_rollout_ref.actor.use_kl_loss=false" in run.grpo_overrides(
        tmp_path, run.build_parser().parse_args(["--kl", "0"]))


def test_report_only_takes_the_settings_of_the_recorded_plan(tmp_path, monkeypatch):
    from recipes.learn import run

    output = tmp_path / "fig.json"
    planned = report.plan("relevance", run.planned_settings(run.build_parser().parse_args(["--grpo-steps", "20"])))
    run.write_figures(output, {"relevance": {"plan": planned}})
    seen = {}

    def fake_run(task, out, args, plan):
        seen.update(args=args, plan=plan)
        return {"verdict": []}, []

    monkeypatch.setattr(run, "run_task", fake_run)
    monkeypatch.setattr(report, "plot", lambda tasks, path: None)
    assert run.main(["--report-only", "--output", str(output), "--grpo-steps", "99", "--lr", "1e-3"]) == 0
    assert (seen["args"].grpo_steps, seen["args"].lr, seen["plan"]) == (20, 5e-6, planned)
    assert json.loads(output.read_text())["tasks"]["relevance"]["plan"] == planned  # still the recorded plan


def test_the_plan_is_on_record_before_anything_trains(tmp_path, monkeypatch):
    from rearank.errors import RearankError
    from recipes.learn import run

    output = tmp_path / "fig.json"

    def fake_run(task, out, args, plan):
        recorded = json.loads(output.read_text())["tasks"][task]
        assert recorded == {"plan": plan, "status": "planned; not run yet"}
        raise RearankError("stopped here")

    monkeypatch.setattr(run, "run_task", fake_run)
    assert run.main(["--output", str(output), "--grpo-steps", "30", "--eval-every", "10"]) == 1
    planned = json.loads(output.read_text())["tasks"]["relevance"]["plan"]
    assert planned["evaluation_steps"] == [0, 10, 20, 30] and planned["settings"]["grpo_steps"] == 30


def test_report_only_without_a_plan_says_so(tmp_path, capsys):
    from recipes.learn import run

    assert run.main(["--report-only", "--output", str(tmp_path / "none.json")]) == 1
    assert "holds no plan for relevance" in capsys.readouterr().err


def test_the_gate_probe_holds_each_best_position_equally():
    from recipes.learn.run import balanced

    rows = [{"extra_info": {"target": t}} for t in [1, 1, 1, 2, 1, 3, 2, 4, 4, 3, 2, 4]]
    probe = balanced(rows, 8, size=4)
    assert [r["extra_info"]["target"] for r in probe] == [1, 1, 2, 3, 2, 4, 4, 3]
    assert len(balanced(rows, 4, size=4)) == 4


def test_a_new_plan_keeps_the_attempts_that_ran_with_their_outcomes(tmp_path):
    output = tmp_path / "train_learn.json"
    outcomes = tmp_path / "train_learn_relevance_outcomes.jsonl.gz"
    outcomes.write_bytes(b"attempt two")
    first = {"verdict": ["missed"], "attempt": 1}
    ran = {"plan": {"grpo_steps": 56}, "verdict": ["the gate failed"], "earlier_attempts": [first]}
    kept = earlier_attempts(ran, output, "relevance")
    assert kept[0] == first and kept[1]["verdict"] == ["the gate failed"] and kept[1]["attempt"] == 2
    assert "earlier_attempts" not in kept[1]  # not nested
    assert kept[1]["outcomes_file"] == "train_learn_relevance_attempt2_outcomes.jsonl.gz"
    assert not outcomes.exists() and (tmp_path / kept[1]["outcomes_file"]).read_bytes() == b"attempt two"
    planned_only = {"plan": {"grpo_steps": 56}, "status": "planned; not run yet", "earlier_attempts": kept}
    assert earlier_attempts(planned_only, output, "relevance") == kept  # a plan that never ran is not an attempt
    assert earlier_attempts({}, output, "relevance") == []


# --set-size N: the 2-passage fallback of issue #45

def test_the_reward_refuses_an_id_beyond_a_two_passage_window():
    truth = json.dumps({"labels": [0, 2]})
    assert compute_score("learn/relevance/dl19", "[2]", truth)["score"] == 1.0
    assert compute_score("learn/relevance/dl19", "[1]", truth)["score"] == 0.0
    beyond = compute_score("learn/relevance/dl19", "[3]", truth)
    assert (beyond["score"], beyond["valid"], beyond["first"]) == (-1.0, 0.0, -1.0)
    assert compute_score("learn/relevance/dl19", "[3]", TRUTH)["valid"] == 1.0  # in range on four passages


def test_two_passage_windows_hold_each_position_equally_often():
    texts = [f"passage number {i} about something" for i in range(8)]
    qrels = {"q1": {"q1-d0": 3, "q1-d1": 0, "q1-d2": 0, "q1-d3": 2},
             "q2": {f"q2-d{i}": (2 if i < 3 else 0) for i in range(8)}}
    requests = [request("q1", texts), request("q2", texts)]
    rows = list(windows("relevance", "dl19", requests, qrels, 3, seed=0, size=2))
    assert [r["extra_info"]["target"] for r in rows] == [1, 2, 1, 2, 1, 2]
    for row in rows:
        labels = json.loads(row["reward_model"]["ground_truth"])["labels"]
        assert len(labels) == 2 and labels[row["extra_info"]["target"] - 1] >= 2 and 0 in labels
        assert [line.rsplit(" ", 1)[1] for line in shown_lines(row)] == ["[1]", "[2]"]
    phrase = list(windows("phrase", "dl21", [request("q1", WORDS)], {}, 6, seed=3, size=2))
    assert [r["extra_info"]["target"] for r in phrase] == [1, 2] * 3
    assert all(len(r["extra_info"]["shown"]) == 2 for r in phrase)
    held = heldout("dl19", requests, qrels, 4, seed=1, size=2)
    assert [r["extra_info"]["target"] for r in held] == [1, 2, 1, 2]
    assert len({(r["extra_info"]["qid"], r["extra_info"]["shown"][r["extra_info"]["target"] - 1]) for r in held}) == 4
    topics = ["solar power", "river fish", "mountain bike"]
    runs = [Request(Query(f"q{k}", t), [Candidate(f"q{k}-d{i}", 1.0, f"{t if i % 2 else 'other'} {k}-{i}")
                                        for i in range(6)]) for k, t in enumerate(topics)]
    lexical = list(lexical_windows("dl21", runs, 8, seed=0, size=2))
    assert len(lexical) >= 12
    assert [r["extra_info"]["target"] for r in lexical] == [1 + i % 2 for i in range(len(lexical))]
    for row in lexical:
        info = row["extra_info"]
        assert len(info["shown"]) == 2 and unique_best(overlap(info["query"], info["shown"])) == info["target"] - 1
    ordered = balanced_order([{"extra_info": {"target": t}} for t in [1, 1, 1, 2, 2, 1]], seed=0, size=2)
    assert [r["extra_info"]["target"] for r in ordered] == [1, 2, 1, 2]


def test_two_passage_sft_targets_and_probe_name_only_ids_1_and_2():
    from recipes.learn.run import balanced

    rows = [{"prompt": [{"role": "user", "content": "x"}], "extra_info": {"target": 1 + i % 2}} for i in range(2000)]
    targets = [answer[0] for _, answer in sft_examples(rows, DigitTokenizer(), right=0.75, seed=0, size=2)]
    assert set(targets) == {1, 2} and 0.47 < targets.count(1) / 2000 < 0.53
    assert 0.72 < sum(t == r["extra_info"]["target"] for t, r in zip(targets, rows)) / 2000 < 0.78
    probe = balanced([{"extra_info": {"target": t}} for t in [1, 1, 1, 2, 1, 2]], 4, size=2)
    assert [r["extra_info"]["target"] for r in probe] == [1, 1, 2, 2]


def test_figures_and_constant_baselines_on_two_passages():
    fig = report.figures("grpo", 1, [outcome(1, 1), outcome(1, 2), outcome(1, 1), outcome(2, 2)], size=2)
    assert fig["answer_share_by_position"] == {"1": 0.75, "2": 0.25}
    assert fig["accuracy_by_position"] == {"1": 1.0, "2": 0.5} and fig["top1"] == 0.75
    rows = [window("red car", ["a red car", "blue sky"], 1), window("moon", ["sun", "stars"], 2)]
    result = report.baselines(rows, size=2)
    assert result["constant_position"] == {"1": 0.5, "2": 0.5} and result["best_constant"] == 0.5
    assert result["query_term_overlap"] == pytest.approx((1 + 0.5) / 2)  # the second: a two-way tie


def test_the_gate_thresholds_at_two_and_four_passages():
    assert report.gate_thresholds(4) == {"format_valid_min": 0.9, "zero_spread_max": 0.3, "position_max": 0.4}
    assert report.gate_thresholds(2) == {"format_valid_min": 0.9, "zero_spread_max": 0.3, "position_max": 0.6}
    assert report.chance_zero_spread(4, 4) == pytest.approx(0.75 ** 4 + 0.25 ** 4)  # 0.32
    assert report.chance_zero_spread(2, 4) == 0.125
    spread = [[scored(0, 0), scored(1, 0), scored(1, 0), scored(0, 0)]] * 3
    leaning = [outcome(1, 1), outcome(2, 2), outcome(1, 1), outcome(2, 2), outcome(1, 2)]  # position 1: 3 of 5
    two = report.gate(spread, leaning, size=2)
    assert two["passed"] and two["largest_position_share"] == 0.6 and two["thresholds"]["position_max"] == 0.6
    assert two["zero_spread_at_chance"] == 0.125 and two["sampled_answer_share"] == {"1": 0.5, "2": 0.5}
    assert not report.gate(spread, leaning, size=4)["passed"]  # the same answers: 0.6 > 0.4 on four passages
    assert report.gate(spread, leaning, size=4)["zero_spread_at_chance"] == pytest.approx(0.3203125)
    assert not report.gate(spread, [*leaning, outcome(1, 2)], size=2)["passed"]  # position 1: 4 of 6 > 0.6


def test_the_verdict_limit_at_two_and_four_passages_and_its_label():
    assert report.end_position_max(4) == 0.5 and report.end_position_max(2) == pytest.approx(2 / 3)
    planned = report.plan("relevance", {"grpo_steps": 14, "eval_every": 14, "set_size": 2})
    start = [report.figures("base", 0, [outcome(2, 1)] * 8, size=2),
             report.figures("warm start", 0, [outcome(1, 1 + i % 2) for i in range(8)], size=2)]
    gold = [1 + i % 2 for i in range(8)]

    def end(answers):
        return [*start, report.figures("grpo", 14, [outcome(a, g) for a, g in zip(answers, gold)], size=2)]

    lexical = {"best_constant": 0.5, "query_term_overlap": 0.6, "bm25_on_shown_words": 0.58}
    lines = report.verdict("relevance, 2 passages", planned, end([1, 2, 1, 2, 1, 2, 1, 1]), WON, lexical, size=2)
    assert all(line.startswith("relevance, 2 passages: ") for line in lines)
    assert "0.62 (within 0.667)" in lines[-2] and "target MET" in lines[-1] and "over 0.667" in lines[-1]
    habit = report.verdict("relevance, 2 passages", planned, end([1, 2, 1, 1, 1, 2, 1, 1]), WON, lexical, size=2)
    assert "0.75 (ABOVE 0.667)" in habit[-2] and "target NOT met" in habit[-1]


def test_the_plan_records_the_set_size_and_a_two_passage_run_has_its_own_entry(tmp_path, monkeypatch):
    from recipes.learn import run

    output = tmp_path / "fig.json"
    four = report.plan("relevance", run.planned_settings(run.build_parser().parse_args([])))
    assert four["settings"]["set_size"] == 4
    run.write_figures(output, {"relevance": {"plan": four, "verdict": ["relevance: four"], "evaluations": []}})
    seen, plotted = {}, {}

    def fake_run(task, out, args, plan):
        seen.update(task=task, size=args.set_size, plan=plan)
        return {"verdict": ["relevance, 2 passages: done"], "evaluations": []}, [{"task": "relevance, 2 passages"}]

    monkeypatch.setattr(run, "run_task", fake_run)
    monkeypatch.setattr(report, "plot", lambda tasks, path: plotted.update(tasks))
    assert run.main(["--output", str(output), "--set-size", "2", "--heldout", "16"]) == 0
    tasks = json.loads(output.read_text())["tasks"]
    assert list(tasks) == ["relevance", "relevance, 2 passages"] and list(plotted) == list(tasks)
    assert tasks["relevance"]["plan"] == four and tasks["relevance"]["verdict"] == ["relevance: four"]  # untouched
    assert tasks["relevance, 2 passages"]["plan"]["settings"]["set_size"] == 2 == seen["size"]
    # the warm start's default stop rule is a third of the way from chance to 1 on the run's window size
    assert tasks["relevance, 2 passages"]["plan"]["settings"]["sft_until"] == 0.667 and run.sft_until(4) == 0.5
    assert seen["task"] == "relevance" and seen["plan"] == tasks["relevance, 2 passages"]["plan"]
    assert (tmp_path / "fig_relevance_2passages_outcomes.jsonl.gz").is_file()
    assert not (tmp_path / "fig_relevance_outcomes.jsonl.gz").exists()
    # --report-only --set-size 2 finds the 2-passage plan
    assert run.main(["--report-only", "--output", str(output), "--set-size", "2"]) == 0
    assert seen["size"] == 2 and seen["plan"]["settings"]["heldout"] == 16


def test_a_two_passage_run_works_in_its_own_folder_and_names_itself(tmp_path, monkeypatch):
    from recipes.learn import run

    context = _Inline()
    monkeypatch.setattr(run.multiprocessing, "get_context", lambda method: context)
    monkeypatch.setattr(run, "build_data", fake_data)
    monkeypatch.setattr(report, "baselines", lambda rows, size: {"size": size})
    made = {"outcomes": {"base": [outcome(1, 2)], "warm start": [outcome(2, 2)]}, "gate": {"passed": False},
            "sft_steps_run": 8, "sft_checks": [], "sft_loss": [1.0], "times": {"sft_s": 1}}
    monkeypatch.setattr(run, "warm_start", lambda *a: dict(made))
    args = run.build_parser().parse_args(["--out", str(tmp_path), "--set-size", "2"])
    entry, rows = run.run_task("relevance", tmp_path, args, {"evaluation_steps": [0]})
    assert context.started == ["relevance_2passages-warm-start"]
    assert (tmp_path / "relevance_2passages" / "warm_start.json").is_file() and not (tmp_path / "relevance").exists()
    assert entry["baselines"] == {"size": 2}
    assert entry["evaluations"][1]["answer_share_by_position"] == {"1": 0.0, "2": 1.0}
    assert entry["verdict"][0].startswith("relevance, 2 passages: the warm start failed the gate")
    assert {r["task"] for r in rows} == {"relevance, 2 passages"}


@pytest.mark.parametrize(("argv", "says"), [
    (["--set-size", "1"], "--set-size 1: at least 2 passages"),
    (["--prompts-per-step", "6"], "--prompts-per-step 6: not a multiple of --set-size 4"),
    (["--set-size", "2", "--heldout", "511"], "--heldout 511: not a multiple of --set-size 2"),
    (["--set-size", "2", "--sft-until", "0.5"], "--sft-until 0.5: at or below chance on 2 passages (0.5)"),
])
def test_a_set_size_that_breaks_the_balance_is_refused(tmp_path, capsys, argv, says):
    from recipes.learn import run

    assert run.main(["--output", str(tmp_path / "fig.json"), *argv]) == 1
    assert says in capsys.readouterr().err and not (tmp_path / "fig.json").exists()


# verl's workers killed by Ray for memory: one line, not Hydra's tail

OOM_LOG = """(TaskRunnerV1 pid=22898) step:3 - critic/score/mean:0.250
(raylet) 1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 10.0.0.5, ID: 3f2a) \
was 21.90GB used / 22.33GB limit (0.980743)
Traceback (most recent call last):
ray.exceptions.OutOfMemoryError: 2 worker(s) were killed due to the node running low on memory. Memory on the node \
(IP: 10.0.0.5, ID: 3f2a) was 22.35GB used / 22.33GB limit (1.000896)
Error executing job with overrides: ['data.train_batch_size=8']
Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.
"""


def fake_verl(folder, text, code):
    """A module ``fake_verl`` in ``folder`` that prints ``text`` and exits with ``code``; the env that finds it."""
    import os

    (folder / "fake_verl.py").write_text(f"import sys\nsys.stdout.write({text!r})\nsys.exit({code})\n")
    return {**os.environ, "PYTHONPATH": str(folder)}


def test_a_child_killed_by_ray_for_memory_fails_with_one_line(tmp_path):
    import sys

    from rearank.errors import RearankError
    from recipes.checks.cpu import OutOfMemory, _run, ray_out_of_memory

    assert ray_out_of_memory("Traceback\nValueError: no\n") is None
    log = tmp_path / "logs" / "verl.1.log"
    with pytest.raises(OutOfMemory) as caught:
        _run([sys.executable, "-m", "fake_verl"], log, fake_verl(tmp_path, OOM_LOG, 1))
    message = str(caught.value)
    assert "\n" not in message and "HYDRA" not in message
    assert message == (f"fake_verl failed: Ray killed 2 worker(s), the node running low on memory (22.35 GB used / "
                       f"22.33 GB limit) (log {log}); close other jobs and run the same command again")
    # the log is appended to: an earlier run's memory error does not name a later, other failure
    with pytest.raises(RearankError, match="fake_verl exited with 3; log .*its end:\n") as other:
        _run([sys.executable, "-m", "fake_verl"], log, fake_verl(tmp_path, "ValueError: a bad override\n", 3))
    assert not isinstance(other.value, OutOfMemory)


def test_learn_ends_with_one_line_when_ray_kills_verl_for_memory(tmp_path, monkeypatch, capsys):
    import sys

    from recipes.checks.cpu import _run
    from recipes.learn import run

    monkeypatch.setattr(run.multiprocessing, "get_context", lambda method: _Inline())
    monkeypatch.setattr(run, "build_data", fake_data)
    monkeypatch.setattr(report, "baselines", lambda rows, size: {})
    made = {"outcomes": {"base": [outcome(1, 2)], "warm start": [outcome(2, 2)]}, "gate": {"passed": True},
            "sft_steps_run": 8, "sft_checks": [], "sft_loss": [1.0], "times": {"sft_s": 1}}
    monkeypatch.setattr(run, "warm_start", lambda *a: dict(made))
    env = fake_verl(tmp_path, OOM_LOG, 1)
    monkeypatch.setattr(run, "train", lambda stage, data, model, folder, steps, overrides: _run(
        [sys.executable, "-m", "fake_verl"], folder / "logs" / "verl.1.log", env))
    assert run.main(["--out", str(tmp_path / "runs"), "--output", str(tmp_path / "fig.json")]) == 1
    err = capsys.readouterr().err
    log = tmp_path / "runs" / "relevance" / "grpo" / "logs" / "verl.1.log"
    assert err == (f"train-learn: relevance: GRPO stopped: Ray killed 2 worker(s), the node running low on memory "
                   f"(22.35 GB used / 22.33 GB limit) (log {log}); close other jobs; rerunning the same command "
                   "reads the warm start back and restarts GRPO\n")
