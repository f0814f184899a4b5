"""recipes/learn (``make train-learn``): the one-action reward, the two tasks' windows, what the report measures,
and the Hydra override merge the GRPO stage relies on."""

import json

import numpy as np
import pytest

from rearank.types import Candidate, Query, Request
from recipes.checks.cpu import merge_overrides
from recipes.learn import report
from recipes.learn.reward import compute_score
from recipes.learn.run import sft_examples
from recipes.learn.windows import PHRASE_WORDS, windows
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
    rows = list(windows("phrase", "dl21", [request("q1", WORDS), request("q2", WORDS)], {}, 4, seed=3))
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
    rows = list(windows("phrase", "dl21", [request("q1", texts)], {}, 8, seed=0))
    queries = [r["prompt"][-1]["content"].rsplit("Search query: ", 1)[1] for r in rows]
    assert 0 < len(rows) < 8  # the draws whose target was the first passage were skipped
    assert shared not in queries and "r s" in " ".join(queries)


def test_relevance_windows_hold_one_relevant_and_three_judged_zero():
    texts = [f"passage number {i} about something" for i in range(8)]
    qrels = {"q1": {"q1-d0": 3, "q1-d1": 0, "q1-d2": 0, "q1-d3": 0, "q1-d4": 1}}  # d4 grade 1: never used
    rows = list(windows("relevance", "dl19", [request("q1", texts), request("q2", texts)], qrels, 5, seed=0))
    assert len(rows) == 5  # q2 has no judgments
    for k, row in enumerate(rows):
        labels = json.loads(row["reward_model"]["ground_truth"])["labels"]
        assert labels == [3 if i == k % 4 else 0 for i in range(4)]
        assert "Search query: topic q1" in row["prompt"][-1]["content"]


def test_sft_targets_are_right_at_the_asked_rate_and_balanced():
    class Tok:
        eos_token_id = 0

        def encode(self, text, add_special_tokens=False):
            return [int(text.strip("[]"))]

        def apply_chat_template(self, messages, **kwargs):
            return {"input_ids": [9, 9]}

    rows = [{"prompt": [{"role": "user", "content": "x"}], "extra_info": {"target": 1 + i % 4}} for i in range(4000)]
    examples = sft_examples(rows, Tok(), right=0.5, seed=0)
    targets = [answer[0] for _, answer in examples]
    right = sum(t == r["extra_info"]["target"] for t, r in zip(targets, rows))
    assert 0.47 < right / 4000 < 0.53
    assert all(0.23 < targets.count(k) / 4000 < 0.27 for k in range(1, 5))
    assert all(answer[-1] == 0 for _, answer in examples)  # each answer ends with the end-of-sequence token


def item(first, relevant, score=None, inp="p"):
    valid = first >= 0
    top1 = valid and first == relevant
    return {"first": first, "relevant": relevant, "valid": float(valid), "top1": float(top1), "ndcg": 0.5,
            "score": score if score is not None else (1.0 if top1 else 0.0 if valid else -1.0), "input": inp}


def test_figures_count_picks_and_accuracy_by_position():
    items = [item(0, 0), item(0, 1), item(2, 2), item(-1, 3)]
    fig = report.figures("grpo", 5, items)
    assert (fig["mean_reward"], fig["format_valid"], fig["top1"], fig["items"]) == (0.25, 0.75, 0.5, 4)
    assert fig["top1_by_position"] == {"1": 0.5, "2": 0.0, "3": 0.25, "4": 0.0}
    assert fig["accuracy_by_position"] == {"1": 1.0, "2": 0.0, "3": 1.0, "4": 0.0}


def test_gate_passes_and_fails_on_each_threshold():
    spread = [[item(0, 0), item(1, 0)], [item(2, 2), item(3, 2)], [item(1, 1), item(2, 1)]]
    balanced = [item(k % 4, 0) for k in range(8)]
    assert report.gate(spread, balanced)["passed"]
    flat = [[item(0, 0), item(0, 0)]] + spread  # 1 of 4 groups without spread: 0.25 <= 0.3
    assert report.gate(flat, balanced)["zero_spread"] == 0.25 and report.gate(flat, balanced)["passed"]
    assert not report.gate([[item(0, 0), item(0, 0)]] * 2 + spread, balanced)["passed"]  # 2 of 5: 0.4
    assert not report.gate(spread, [item(0, 0)] * 4 + balanced)["passed"]  # position 1: 6 of 12 = 0.5
    assert not report.gate([[item(-1, 0), item(1, 0)]] * 3, balanced)["passed"]  # format 0.5


def test_paired_matches_items_by_prompt():
    before = [item(0, 1, inp=f"p{i}") for i in range(10)]  # all wrong
    after = [item(1, 1, inp=f"p{i}") for i in reversed(range(10))]  # all right, listed in another order
    test = report.paired(before, after, "start", "end")
    assert test["items"] == 10
    assert test["reward"]["mean_gain"] == 1.0 and test["reward"]["items_better"] == 10
    assert test["top1"]["p_value"] == pytest.approx(2 / 2 ** 10)
    assert test["top1"]["only_candidate_right"] == 10 and test["top1"]["only_baseline_right"] == 0


def test_paired_refuses_duplicate_prompts():
    with pytest.raises(ValueError, match="share one prompt"):
        report.paired([item(0, 0), item(1, 0)], [item(0, 0)], "a", "b")


def test_dumps_are_read_per_step(tmp_path):
    rows = {"1": [("a_0_0", 1.0), ("a_1_0", 0.0), ("b_0_0", -1.0), ("b_1_0", -1.0)], "2": [("c_0_0", 0.0)]}
    for step, dumped in rows.items():
        (tmp_path / f"{step}.jsonl").write_text("".join(json.dumps({"uid": u, "score": s}) + "\n" for u, s in dumped))
    assert report.zero_spread(tmp_path) == {1: 0.5, 2: 1.0}
    assert list(report.validations(tmp_path)) == [1, 2]


def test_verdict_names_significance_and_the_position_share():
    evals = [report.figures("base", 0, [item(-1, 0)] * 4), report.figures("sft", 8, [item(0, 0), item(1, 0)] * 2),
             report.figures("grpo", 40, [item(0, 0)] * 4)]
    test = {"items": 4, "reward": {"mean_gain": 0.5, "p_value": 0.01}, "top1": {"mean_gain": 0.5, "p_value": 0.5}}
    lines = report.verdict("phrase", evals, test)
    assert "GRPO above its start at p < 0.05" in lines[1]
    assert "1.00 (ABOVE 0.6)" in lines[2]
    test["reward"]["p_value"] = 0.2
    assert "NOT significantly" in report.verdict("phrase", evals, test)[1]


def test_merge_overrides_replaces_keys_and_appends_new_ones():
    base = ["a.b=1", "++c.d='x'", "+e=2", "f=3"]
    merged = merge_overrides(base, ["c.d='y'", "a.b=5", "g=7"])
    assert merged == ["a.b=5", "c.d='y'", "+e=2", "f=3", "g=7"]


def test_a_saved_warm_start_made_with_other_settings_is_refused(tmp_path, monkeypatch):
    from rearank.errors import RearankError
    from recipes.learn import run

    monkeypatch.setattr(run, "build_data", lambda task, folder, args: ([], [], []))
    args = run.build_parser().parse_args(["--out", str(tmp_path)])
    (tmp_path / "phrase" / "sft-model").mkdir(parents=True)
    (tmp_path / "phrase" / "sft-model" / "config.json").write_text("{}")
    saved = {key: getattr(args, key) for key in run.WARM_START_SETTINGS}
    (tmp_path / "phrase" / "warm_start.json").write_text(json.dumps({"settings": {**saved, "sft_steps": 99}}))
    with pytest.raises(RearankError, match="sft_steps.: 99.*delete"):
        run.run_task("phrase", tmp_path, args)


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
    monkeypatch.setattr(run, "build_data", lambda task, folder, args: ([], [], []))
    made = {"evaluations": [{"stage": "base"}], "gate": {"passed": False}, "times": {"sft_s": 1}}
    monkeypatch.setattr(run, "warm_start", lambda *a: dict(made))
    args = run.build_parser().parse_args(["--out", str(tmp_path)])
    result = run.run_task("phrase", tmp_path, args)
    assert context.started == ["phrase-warm-start"]
    saved = json.loads((tmp_path / "phrase" / "warm_start.json").read_text())
    assert saved["settings"] == {key: getattr(args, key) for key in run.WARM_START_SETTINGS}
    assert result["evaluations"] == made["evaluations"] and "GRPO not run" in result["verdict"][0]


def test_a_warm_start_process_that_fails_ends_the_task_with_one_line(tmp_path, monkeypatch):
    from rearank.errors import RearankError
    from recipes.learn import run

    monkeypatch.setattr(run.multiprocessing, "get_context", lambda method: _Inline(fails=1))
    monkeypatch.setattr(run, "build_data", lambda task, folder, args: ([], [], []))
    args = run.build_parser().parse_args(["--out", str(tmp_path)])
    with pytest.raises(RearankError, match="phrase: the warm start's process ended with exit code 1 and no .*warm_start"):
        run.run_task("phrase", tmp_path, args)


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


def test_verl_validates_as_the_warm_start_was_evaluated(tmp_path):
    from recipes.learn import run

    sampled = run.grpo_overrides(tmp_path, run.build_parser().parse_args([]))
    assert {"actor_rollout_ref.rollout.val_kwargs.do_sample=true", "actor_rollout_ref.rollout.val_kwargs.temperature=1.0",
            "actor_rollout_ref.rollout.val_kwargs.n=1", "trainer.val_before_train=true"} <= set(sampled)
    greedy = run.grpo_overrides(tmp_path, run.build_parser().parse_args(["--eval-temperature", "0"]))
    assert "actor_rollout_ref.rollout.val_kwargs.do_sample=false" in greedy


def test_the_gate_probe_holds_each_best_position_equally():
    from recipes.learn.run import balanced

    rows = [{"extra_info": {"target": t}} for t in [1, 1, 1, 2, 1, 3, 2, 4, 4, 3, 2, 4]]
    probe = balanced(rows, 8)
    assert [r["extra_info"]["target"] for r in probe] == [1, 1, 2, 3, 2, 4, 4, 3]
    assert len(balanced(rows, 4)) == 4
