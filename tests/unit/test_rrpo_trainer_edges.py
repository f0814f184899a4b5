"""RRPO trainer edges on a fake scorer (one weight a passage, its title's place in WORDS) and the gold reader of
test_rrpo_trainer.py's questions (question i's gold passage is i % 4): exact episodes, update figures, the loop's
log, checkpoints and resume, the config's checks, and a rank that is not the first."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
import torch

from rearank.errors import RearankError
from rearank.rag.readers import GoldReader
from rearank.rag.rrpo import trainer as trainer_module
from rearank.rag.rrpo.distributed import Group
from rearank.rag.rrpo.trainer import (
    Episode,
    RRPOConfig,
    RRPOTrainer,
    build_trainer,
    evaluate_policy,
    load_items,
    step_rewards,
)
from tests.unit.test_engine_generate_edges import BARS, Bar
from tests.unit.test_rrpo_trainer import WORDS, config, qa_file

torch.set_num_threads(1)  # mutmut forks one test run per mutant: one thread each keeps its CPU time bounded

#: A policy whose greedy and sampled picks are both [1, 2] (the draw's Gumbel noise never bridges 50 nats).
PEAKED = "w:0,100,50,0"
#: The uniform reference's log-probs of picks [1, 2] of 4 passages.
REF = (-math.log(4), -math.log(3))


def k3(logp=(0.0, 0.0)):
    """The mean over steps of the k3 KL to REF: r - log r - 1, r = pi_ref / pi."""
    return sum(math.exp(r - p) - (r - p) - 1 for p, r in zip(logp, REF)) / 2


#: k3 KL of picks [1, 2] at log-prob 0 to the uniform reference.
K3_UNIFORM = k3()


class Weights(torch.nn.Module):
    def __init__(self, w) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.as_tensor(w, dtype=torch.float32).clone())
        self.frozen = torch.nn.Parameter(torch.zeros(1), requires_grad=False)


class FakeScorer:
    """Scores are the weights of the passages' titles; ``load`` takes ``w:a,b,..`` or a folder ``save`` wrote."""

    loads: ClassVar[list] = []

    def __init__(self, w) -> None:
        self.model = Weights(w)
        self.calls, self.questions = 0, []

    @classmethod
    def load(cls, name, *, kind=None, device=None, num_layers=None, max_passage_tokens=None):
        cls.loads.append((str(name), kind, device, num_layers, max_passage_tokens))
        name = str(name)
        if name == "rand":
            return cls(torch.rand(4))
        if name.startswith("w:"):
            return cls([float(x) for x in name[2:].split(",")])
        return cls(torch.load(Path(name) / "w.pt"))

    def scores(self, question, docs):
        self.calls += 1
        self.questions.append(question)
        return torch.stack([self.model.w[WORDS.index(title)] for title, _ in docs])

    def save(self, path) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        torch.save(self.model.w.detach().clone(), Path(path) / "w.pt")


class MirrorGroup(Group):
    """Rank 1 of 2 whose twin holds the same episodes: gather gives this rank's object twice; no process group."""

    def __init__(self) -> None:
        super().__init__(1, 2)

    def gather(self, obj):
        return [obj, obj]

    def sum_gradients(self, parameters) -> None:
        pass

    def barrier(self) -> None:
        pass


class TwinGroup(MirrorGroup):
    """A MirrorGroup whose twin's raw advantages are [5, 5, 5]; it records the parameters whose gradients it sums."""

    def __init__(self) -> None:
        super().__init__()
        self.summed = []

    def gather(self, obj):
        return [[5.0, 5.0, 5.0] if isinstance(obj, list) else obj, obj]

    def sum_gradients(self, parameters) -> None:
        self.summed.append(list(parameters))


@pytest.fixture(autouse=True)
def fakes(monkeypatch):
    monkeypatch.setattr(trainer_module, "PointwiseScorer", FakeScorer)
    monkeypatch.setattr(trainer_module, "tqdm", Bar)
    FakeScorer.loads = []
    BARS.clear()


def items(tmp_path, n=3):
    return load_items(str(qa_file(tmp_path / "qa.jsonl", n)), "auto", None, None)


def trainer(tmp_path, policy=PEAKED, reference="w:0,0,0,0", n=3, reader=None, **extra):
    cfg = config(tmp_path, "unused", k=2, **extra)
    return RRPOTrainer(cfg, FakeScorer.load(policy), FakeScorer.load(reference), reader or GoldReader(),
                       items(tmp_path, n))


def log_of(path):
    return [json.loads(x) for x in (path / "log.jsonl").read_text().splitlines()]


# --- config ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("bad", "message"), [
    ({"data": ""}, "'data' (a QA training file) is required"),
    ({"k": 0}, "k must be at least 1, got 0"), ({"epochs": 0}, "epochs must be at least 1, got 0"),
    ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
    ({"ppo_epochs": 0}, "ppo_epochs must be at least 1, got 0"),
    ({"save_every": 0}, "save_every must be at least 1, got 0"),
    ({"norm_window": 0}, "norm_window must be at least 1, got 0"),
    ({"mini_batch_size": 0}, "mini_batch_size must be at least 1, got 0"),
    *[(bad, "need lr > 0, 0 < clip_eps < 1, beta >= 0") for bad in ({"lr": 0.0}, {"clip_eps": 0.0}, {"clip_eps": 1.0},
                                                                    {"beta": -0.1})]])
def test_config_checks_each_bound(bad, message):
    with pytest.raises(RearankError, match=f"^RRPO config: {re.escape(message)}$"):
        RRPOConfig.from_dict({"data": "x", **bad})


def test_config_bounds_themselves_are_allowed():
    cfg = RRPOConfig.from_dict({"data": "x", "k": 1, "epochs": 1, "batch_size": 1, "ppo_epochs": 1, "save_every": 1,
                                "norm_window": 1, "mini_batch_size": 1, "beta": 0.0, "clip_eps": 0.5})
    assert (cfg.k, cfg.mini_batch_size, cfg.beta) == (1, 1, 0.0)


def test_config_yaml_is_read_as_utf8_whatever_the_locale(tmp_path, ascii_locale):
    path = tmp_path / "c.yaml"
    path.write_text("data: qa.jsonl\noutput: runs/é\n", encoding="utf-8")
    assert RRPOConfig.from_yaml(path).output == "runs/é"


def test_the_last_batch_of_an_epoch_may_be_short(tmp_path):
    t = trainer(tmp_path, n=7, epochs=1, batch_size=3)
    t.output = tmp_path / "new" / "run"  # its parent is made too
    t.train(progress=False)
    assert (BARS[0].kwargs["total"], sum(BARS[0].updates), t.step) == (3, 3, 3)
    assert [r["step"] for r in log_of(t.output)] == [1, 2, 3]  # no held-out data: no held-out lines


def test_a_run_resumed_within_its_first_epoch_does_not_evaluate_the_reference_again(tmp_path):
    t = trainer(tmp_path, epochs=1, batch_size=2)
    t.heldout = t.items[:1]
    t.step, t.position = 1, 2  # one batch of two done
    t.train(progress=False)
    assert [r.get("heldout") for r in log_of(t.output)] == [None, "epoch 1"]


def test_config_from_yaml_overrides_and_refuses(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("data: a.jsonl\nk: 4\n")
    assert (RRPOConfig.from_yaml(path, {"k": 5}).k, RRPOConfig.from_yaml(path).k) == (5, 4)
    with pytest.raises(RearankError, match=rf"^{path}: unknown RRPO settings \['colour'\]; known: \["):
        RRPOConfig.from_yaml(path, {"colour": 1})
    path.write_text("")
    with pytest.raises(RearankError, match="'data'"):
        RRPOConfig.from_yaml(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(RearankError, match=rf"^{path}: expected a mapping of settings$"):
        RRPOConfig.from_yaml(path)
    with pytest.raises(RearankError, match=rf"^cannot read the RRPO config {tmp_path / 'no.yaml'}: "):
        RRPOConfig.from_yaml(tmp_path / "no.yaml")
    path.write_text("data: [\n")
    with pytest.raises(RearankError, match="^cannot read the RRPO config"):
        RRPOConfig.from_yaml(path)
    with pytest.raises(RearankError, match=r"^config: unknown RRPO settings \['x'\]"):
        RRPOConfig.from_dict({"data": "a", "x": 1})


# --- episodes --------------------------------------------------------------------------------------------------


def test_step_rewards_read_every_prefix_in_one_batch(tmp_path):
    reader = GoldReader()
    batches = []
    real = reader.read
    reader.read = lambda batch: batches.append([(i.qid, [p.title for p in ps]) for i, ps in batch]) or real(batch)
    qs = items(tmp_path)
    assert step_rewards(reader, qs, [[1, 2], [1, 2], [1, 2]]) == [([-1.0, -1.0], 0.0), ([3.0, 3.0], 1.0),
                                                                ([-1.0, 3.0], 1.0)]
    assert batches == [[(q, titles) for q in ("q0", "q1", "q2") for titles in (["wrote"], ["wrote", "what"])]]
    assert step_rewards(reader, qs[:1], [[]]) == [([], 0.0)]  # no picks: no rewards, no exact match


def test_evaluate_policy_takes_the_greedy_top_k(tmp_path):
    policy = FakeScorer.load(PEAKED)
    assert evaluate_policy(policy, items(tmp_path), GoldReader(), 2) == {"mean_step_reward": 1.0, "em": 2 / 3}
    assert policy.questions == [i.question for i in items(tmp_path)]
    assert evaluate_policy(policy, items(tmp_path)[1:2], GoldReader(), 1) == {"mean_step_reward": 3.0, "em": 1.0}
    assert evaluate_policy(policy, items(tmp_path), GoldReader(), 1) == {"mean_step_reward": 1 / 3, "em": 1 / 3}
    assert evaluate_policy(policy, [], GoldReader(), 2) == {"mean_step_reward": 0.0, "em": 0.0}


@pytest.mark.parametrize(("literal", "advantages"), [(False, [[-3.5, -4.0], [4.5, 4.0]]),
                                                     (True, [[-2.5, 0.0], [3.5, 0.0]])])
def test_collect_fills_rewards_the_cached_baseline_and_gae(tmp_path, literal, advantages):
    t = trainer(tmp_path, reference="w:100,0,0,50", gamma=0.5, lam=0.5, gae_literal=literal)
    episodes = t.collect(t.items[:2])
    # policy picks [1, 2]; the reference's greedy [0, 3] answers q0 (gold 0) and not q1 (gold 1)
    assert [e.picks for e in episodes] == [[1, 2], [1, 2]]
    assert [(e.rewards, e.em, e.values) for e in episodes] == [([-1.0, -1.0], 0.0, [3.0, 3.0]),
                                                               ([3.0, 3.0], 1.0, [-1.0, -1.0])]
    assert [e.advantages for e in episodes] == advantages
    assert torch.allclose(episodes[0].logp_old, torch.zeros(2), atol=1e-6)
    assert torch.allclose(episodes[0].logp_ref, torch.tensor([-100.0, -100.0]), atol=1e-4)
    assert (t.baseline_calls, t.reader.generated, t.baseline) == (4, 8, {"q0": [3.0, 3.0], "q1": [-1.0, -1.0]})
    t.collect(t.items[:2])
    assert (t.baseline_calls, t.reader.generated, t.reference.calls) == (4, 12, 2)  # cached once per question
    questions = [i.question for i in t.items[:2]]
    assert t.reference.questions == questions and t.policy.questions == questions * 2
    t.update(episodes)
    assert sorted(t.policy.questions[4:]) == sorted(questions * 4)  # 4 PPO epochs, shuffled


def test_the_draw_depends_on_seed_epoch_and_question_not_on_the_batch(tmp_path):
    t = trainer(tmp_path, policy="w:0,0,0,0", n=6)
    alone = t.collect(t.items[3:4])[0].picks
    assert t.collect(t.items[:4])[3].picks == alone
    first = [e.picks for e in t.collect(t.items)]
    assert len({tuple(p) for p in first}) > 1  # the questions' draws differ
    t.epoch = 1
    assert [e.picks for e in t.collect(t.items)] != first
    other = trainer(tmp_path / "seed", policy="w:0,0,0,0", n=6, seed=1)
    assert [e.picks for e in other.collect(other.items)] != first
    assert 0 <= trainer_module._episode_seed(2**40, 10**6, "q" * 100) < 2**63


# --- update ----------------------------------------------------------------------------------------------------


def episode(item, logp_old=(0.0, 0.0), rewards=(-1.0, 3.0), values=(1.0, -1.0), em=1.0, advantages=(1.0, 3.0)):
    """Picks [1, 2] of a PEAKED policy (log-probs 0) against a uniform reference."""
    return Episode(item, [1, 2], torch.tensor(logp_old), torch.tensor(REF), list(rewards),
                   list(values), em, list(advantages))


def test_update_figures_at_ratio_one(tmp_path):
    t = trainer(tmp_path, ppo_epochs=1, batch_size=1, beta=0.3)
    t.baseline_calls = 5
    figures = t.update([episode(t.items[0])])
    # normalised advantages [-1, 1] (mean 2, std 1): the surrogate's mean is 0, the loss is beta * KL
    assert figures == pytest.approx({"loss": 0.3 * K3_UNIFORM, "kl": K3_UNIFORM, "clip_frac": 0.0, "reward": 1.0,
                                     "ref_reward": 0.0, "em": 1.0, "advantage": 2.0, "baseline_calls": 5,
                                     "updates": 1})


def test_update_clips_and_averages_over_mini_batches(tmp_path):
    t = trainer(tmp_path, ppo_epochs=2, batch_size=3, mini_batch_size=2, beta=0.1, clip_eps=0.2)
    figures = t.update([episode(i, logp_old=(-1.0, -0.2)) for i in t.items])
    # ratios e and e^0.2 = 1.22, both clipped (|r - 1| > 0.2); advantages -1 and 1: surrogate min(-e, -1.2) and 1.2
    loss = -((-math.e + 1.2) / 2 - 0.1 * K3_UNIFORM)
    assert figures["updates"] == 4  # 2 PPO epochs x mini-batches of 2 and 1 episodes
    assert figures["loss"] == pytest.approx(loss) and figures["clip_frac"] == pytest.approx(1.0)


def test_each_episode_gets_its_own_normalised_advantages(tmp_path):
    t = trainer(tmp_path, ppo_epochs=1, batch_size=3, beta=0.1)
    figures = t.update([episode(i, advantages=(a, a)) for i, a in zip(t.items, (1.0, 2.0, 6.0))])
    # normalised over the batch (mean 3, std sqrt(14/3)): their mean is 0, so the loss is beta * KL
    assert figures["loss"] == pytest.approx(0.1 * K3_UNIFORM)


def test_advantages_are_normalised_over_every_rank_s(tmp_path):
    t = trainer(tmp_path, ppo_epochs=1, batch_size=2, beta=0.1)
    t.group = TwinGroup()
    figures = t.update([episode(t.items[1])], total=2, offset=1)
    # window [5, 5, 5, 1, 3]: mean 3.8, std 1.6, so this rank's [1, 3] -> [-1.75, -0.5]; its loss is halved (a
    # mini-batch of 2) and the twin's equal part summed in
    assert figures["loss"] == pytest.approx(1.125 + 0.1 * K3_UNIFORM)
    assert t.group.summed == [[t.policy.model.w]]


def test_update_of_one_rank_counts_only_its_episodes(tmp_path):
    t = trainer(tmp_path, ppo_epochs=1, batch_size=3, beta=0.1)
    figures = t.update([episode(t.items[1], logp_old=(-1.0, -0.1))], total=3, offset=1)
    loss = -((-math.e + math.exp(0.1)) / 2 - 0.1 * K3_UNIFORM)
    assert figures["loss"] == pytest.approx(loss / 3)  # one of a mini-batch of 3
    assert figures["clip_frac"] == pytest.approx(0.5 / 3) and figures["reward"] == pytest.approx(1 / 3)
    assert figures["kl"] == pytest.approx(k3((-1.0, -0.1)) / 3) and figures["advantage"] == 2.0  # pi_old's KL


def test_update_moves_the_policy_with_clipped_gradients_and_not_the_reference(tmp_path):
    t = trainer(tmp_path, policy="w:0,0,0,0", lr=0.01, weight_decay=0.5, max_grad_norm=1e-3, ppo_epochs=1,
                batch_size=1)
    assert [g["lr"] for g in t.optimizer.param_groups] == [0.01] and t.optimizer.param_groups[0]["weight_decay"] == 0.5
    assert t.parameters == [t.policy.model.w]  # the frozen parameter is not trained
    logp = trainer_module.pl_log_probs(t.policy.model.w.detach(), [1, 2])
    t.update([episode(t.items[0], logp_old=tuple(logp.tolist()))])
    assert float(t.policy.model.w.grad.norm()) == pytest.approx(1e-3, rel=1e-4)
    # AdamW's first step: -lr * sign(grad) per weight (passage 3's too: it was not picked), no decay at weight 0
    assert t.policy.model.w.detach().abs().tolist() == pytest.approx([0.01] * 4, rel=1e-3)
    assert t.reference.model.w.detach().tolist() == [0.0] * 4


# --- the loop, checkpoints, resume -----------------------------------------------------------------------------


def test_training_logs_each_step_and_the_held_out_figures(tmp_path):
    cfg = config(tmp_path, PEAKED, k=2, save_every=3, eval_data=str(qa_file(tmp_path / "held.jsonl", 3)))
    seen = []
    t = build_trainer(cfg, GoldReader(), log=seen.append)
    saves = []
    real_save = t.save_checkpoint
    t.save_checkpoint = lambda: saves.append(t.step) or real_save()
    t.train()  # with a progress bar
    log = log_of(tmp_path / "run")
    assert log == seen
    bar = BARS[0]
    assert (bar.kwargs, sum(bar.updates), bar.closed) == ({"total": 4, "initial": 0, "unit": "step", "desc": "rrpo",
                                                     "disable": False, "dynamic_ncols": True}, 4, True)
    assert bar.postfixes[-1] == {"reward": f"{log[5]['reward']:.3f}", "ref": f"{log[5]['ref_reward']:.3f}",
                           "kl": f"{log[5]['kl']:.4f}", "refresh": False}
    held = {"heldout_mean_step_reward": 1.0, "heldout_em": 2 / 3}
    assert [r.get("heldout") for r in log] == ["reference", None, None, "epoch 1", None, None, "epoch 2"]
    assert [log[i] for i in (0, 3, 6)] == [{"step": s, "heldout": h, **held} for s, h in
                                           ((0, "reference"), (2, "epoch 1"), (4, "epoch 2"))]
    steps = [r for r in log if "heldout" not in r]
    assert [(r["step"], r["epoch"], r["updates"]) for r in steps] == [(1, 0, 4), (2, 0, 4), (3, 1, 4), (4, 1, 4)]
    assert [(r["baseline_calls"], r["reader_calls"]) for r in steps] == [(6, 18), (12, 30), (12, 42), (12, 48)]
    for epoch in (steps[:2], steps[2:]):  # two batches of 3 of the 6 questions: their means are the epoch's
        assert sum(r["reward"] for r in epoch) / 2 == pytest.approx(2 / 3)
        assert sum(r["ref_reward"] for r in epoch) / 2 == pytest.approx(2 / 3)
        assert sum(r["em"] for r in epoch) / 2 == pytest.approx(0.5)
        assert sum(r["advantage"] for r in epoch) / 2 == pytest.approx(0.99 * 6 / 12)  # A_1 = gamma V_2
    assert all(r["kl"] == pytest.approx(0.0, abs=1e-6) for r in steps)
    assert saves == [2, 3, 4]
    state = json.loads((tmp_path / "run" / "checkpoint" / "state.json").read_text())
    assert {k: state[k] for k in ("step", "epoch", "position", "baseline_calls")} == {
        "step": 4, "epoch": 2, "position": 0, "baseline_calls": 12}
    assert state["baseline"] == t.baseline and len(t.baseline) == 6 and state["config"]["save_every"] == 3
    assert state["normalizer"] == t.normalizer.state() and len(state["normalizer"]["values"]) == 24
    assert set(torch.load(tmp_path / "run" / "checkpoint" / "optimizer.pt", weights_only=False)) == {"optimizer"}
    assert torch.equal(torch.load(tmp_path / "run" / "final" / "w.pt"), t.policy.model.w.detach())
    assert FakeScorer.loads == [(PEAKED, None, "cpu", None, 16)] * 2
    assert not t.reference.model.w.requires_grad and t.policy.model.w.requires_grad


def test_resume_continues_as_an_uninterrupted_run(tmp_path):
    held = str(qa_file(tmp_path / "held.jsonl", 3))
    same = {"eval_data": held, "mini_batch_size": 1, "num_layers": 1}  # one-episode mini-batches: the order counts
    straight = build_trainer(config(tmp_path / "a", "w:0,0,0,0", **same), GoldReader())
    assert FakeScorer.loads == [("w:0,0,0,0", None, "cpu", 1, 16)] * 2  # reference, then policy: the first layer
    straight.train(progress=False)
    first = build_trainer(config(tmp_path / "b", "w:0,0,0,0", **same, epochs=1), GoldReader())
    first.train(progress=False)
    with (tmp_path / "b" / "run" / "log.jsonl").open("a") as f:
        f.write('\n{"step": 3, "reward": 9}\n')  # written after the checkpoint: dropped on resume
    with pytest.raises(RearankError, match=r"^--resume: settings differ from the checkpoint's \(k, lr\)$"):
        build_trainer(config(tmp_path / "b", "w:0,0,0,0", **same, lr=0.5, k=3), GoldReader(), resume=True)
    FakeScorer.loads = []
    resumed = build_trainer(config(tmp_path / "b", "w:0,0,0,0", **same, save_every=5), GoldReader(), resume=True)
    # the reference keeps its first layer; the policy's checkpoint already has one
    assert FakeScorer.loads == [("w:0,0,0,0", None, "cpu", 1, 16),
                                (str(tmp_path / "b" / "run" / "checkpoint" / "scorer"), None, "cpu", None, 16)]
    assert (resumed.step, resumed.epoch, resumed.position, resumed.baseline_calls) == (2, 1, 0, 12)
    assert resumed.normalizer.state() == first.normalizer.state()
    assert resumed.optimizer.state_dict()["state"][0]["step"] == first.optimizer.state_dict()["state"][0]["step"]
    resumed.train(progress=False)
    assert [(b.kwargs["total"], b.kwargs["initial"], b.kwargs["disable"], sum(b.updates)) for b in BARS] == [
        (4, 0, True, 4), (2, 0, True, 2), (4, 2, True, 2)]  # 2 steps an epoch: 6 questions in batches of 3
    assert resumed.baseline_calls == 12 and resumed.baseline == straight.baseline
    # the same lines but reader_calls: the resumed process counts its own reader's calls (no held-out reference)
    logs = [log_of(tmp_path / d / "run") for d in "ab"]
    assert [r.pop("reader_calls") for r in logs[1] if "reader_calls" in r][2:] == [6, 12]
    assert [{k: v for k, v in r.items() if k != "reader_calls"} for r in logs[0]] == logs[1]
    assert torch.allclose(straight.policy.model.w, resumed.policy.model.w, atol=1e-6)


def test_build_refuses_a_used_output_and_a_resume_without_checkpoint(tmp_path):
    with pytest.raises(RearankError, match=r"^--resume: no checkpoint in .*; start without --resume$"):
        build_trainer(config(tmp_path, PEAKED), GoldReader(), resume=True)
    for used in ("checkpoint", "log.jsonl"):
        out = tmp_path / used
        (out / "run").mkdir(parents=True)
        (out / "run" / used).write_text("")
        with pytest.raises(RearankError, match=r"already holds an RRPO run; pass --resume or choose another output$"):
            build_trainer(config(out, PEAKED), GoldReader())


def test_build_limits_questions_and_candidates(tmp_path):
    cfg = config(tmp_path, PEAKED, k=2, limit=4, max_candidates=3, eval_data=str(qa_file(tmp_path / "h.jsonl", 3)),
                 eval_limit=2)
    t = build_trainer(cfg, GoldReader())
    assert (len(t.items), len(t.heldout)) == (4, 2)
    assert {len(i.passages) for i in t.items + t.heldout} == {3}
    with pytest.raises(RearankError, match=r"^RRPO: 6 questions have fewer than k=2 passages \(e\.g\. q0\)$"):
        build_trainer(config(tmp_path / "short", PEAKED, k=2, max_candidates=1), GoldReader())
    four = RRPOTrainer(config(tmp_path / "k", PEAKED, k=4, norm_window=2), FakeScorer.load(PEAKED),
                       FakeScorer.load(PEAKED), GoldReader(), items(tmp_path / "k")[:1])  # k passages: enough
    assert four.normalizer.state() == {"window": 2, "values": []}
    with pytest.raises(RearankError, match="^RRPO: no training questions$"):
        RRPOTrainer(cfg, FakeScorer.load(PEAKED), FakeScorer.load(PEAKED), GoldReader(), [])


def test_build_retrieves_from_a_corpus(tmp_path, monkeypatch):
    from rearank.rag import retrieval

    calls = []
    monkeypatch.setattr(retrieval, "Corpus", lambda spec, progress: calls.append(("corpus", spec, progress)) or "C")
    monkeypatch.setattr(retrieval, "retrieve",
                        lambda qs, corpus, depth: calls.append(("retrieve", len(qs), corpus, depth)) or (qs[:2], None))
    cfg = config(tmp_path, PEAKED, corpus="wiki", depth=7, eval_data=str(qa_file(tmp_path / "h.jsonl", 3)))
    t = build_trainer(cfg, GoldReader())
    assert calls == [("corpus", "wiki", False), ("retrieve", 6, "C", 7), ("retrieve", 3, "C", 7)]
    assert (len(t.items), len(t.heldout)) == (2, 2)
    calls.clear()
    build_trainer(config(tmp_path / "b", PEAKED, corpus="wiki", depth=7), GoldReader())
    assert calls == [("corpus", "wiki", False), ("retrieve", 6, "C", 7)]  # no held-out questions to retrieve for


def test_the_seed_fixes_a_freshly_initialised_scorer(tmp_path):
    torch.manual_seed(123)
    first = build_trainer(config(tmp_path / "a", "rand", seed=3), GoldReader())
    again = build_trainer(config(tmp_path / "b", "rand", seed=3), GoldReader())
    other = build_trainer(config(tmp_path / "c", "rand", seed=4), GoldReader())
    assert torch.equal(first.policy.model.w, again.policy.model.w)
    assert not torch.equal(first.policy.model.w, other.policy.model.w)


def test_build_joins_torchrun_s_group_with_the_config_s_device(tmp_path, monkeypatch):
    import torch.distributed as dist

    joined = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    for name, fake in (("is_initialized", lambda: False), ("init_process_group", lambda backend: joined.append(backend)),
                       ("get_rank", lambda: 1), ("get_world_size", lambda: 2), ("barrier", lambda: None)):
        monkeypatch.setattr(dist, name, fake)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    t = build_trainer(config(tmp_path, PEAKED, device="cuda"), GoldReader())
    assert joined == ["nccl"] and (t.group.rank, t.group.world) == (1, 2) and FakeScorer.loads[0][2] == "cuda:1"


@pytest.mark.parametrize(("local", "device"), [("3", "cuda:3"), (None, "cuda:1")])
def test_a_second_rank_on_gpus_uses_its_local_device(tmp_path, monkeypatch, local, device):
    if local is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", local)
    build_trainer(config(tmp_path, PEAKED, device="cuda"), GoldReader(), group=MirrorGroup())
    assert [d for _, _, d, _, _ in FakeScorer.loads] == [device] * 2
    build_trainer(config(tmp_path / "one", PEAKED, device="cuda"), GoldReader())
    assert FakeScorer.loads[-1][2] == "cuda"


def test_a_rank_that_is_not_the_first_writes_nothing(tmp_path):
    cfg = config(tmp_path, PEAKED, k=2, epochs=1, eval_data=str(qa_file(tmp_path / "h.jsonl", 3)))
    seen = []
    t = build_trainer(cfg, GoldReader(), log=seen.append, group=MirrorGroup())
    sizes = []
    real_update = t.update
    t.update = lambda episodes, total, offset: sizes.append((len(episodes), total, offset)) or real_update(
        episodes, total, offset)
    t.train(progress=True)
    assert sizes == [(1, 3, 2), (1, 3, 2)]  # rank 1 of 2 holds the third of each batch of 3
    assert not (tmp_path / "run").exists() and seen == [] and BARS[0].kwargs["disable"] is True
    state = t.state()
    assert state["baseline_calls"] == 2 * t.baseline_calls == 8 and state["baseline"] == t.baseline
    main = build_trainer(config(tmp_path / "main", PEAKED, k=2, epochs=1), GoldReader())
    main.train(progress=False)
    with (main.output / "log.jsonl").open("a") as f:
        f.write('{"step": 9}\n')
    t.output = main.output
    t.load_checkpoint()
    assert (t.step, t.baseline_calls) == (2, 0)  # the first rank keeps the run's count
    assert log_of(main.output)[-1] == {"step": 9}  # and trims the log: this rank leaves it alone
    (main.output / "log.jsonl").unlink()
    main.load_checkpoint()  # a run without its log resumes
    assert main.step == 2


def test_reader_calls_are_none_for_a_reader_that_does_not_count(tmp_path):
    t = trainer(tmp_path, reader=SimpleNamespace(read=GoldReader().read))
    assert t._reader_calls() is None
    t.reader = GoldReader()
    t.reader.generated = 7
    assert t._reader_calls() == 7


def test_each_epoch_has_its_own_order_of_all_questions(tmp_path):
    t = trainer(tmp_path, n=6)
    assert sorted(i.qid for i in t.order(0)) == [f"q{i}" for i in range(6)]
    assert [i.qid for i in t.order(0)] != [i.qid for i in t.order(1)]
    assert [i.qid for i in t.order(1)] == [i.qid for i in t.order(1)]


def test_mini_batch_orders_follow_the_seed_the_step_and_the_ppo_epoch(tmp_path, monkeypatch):
    drawn, randperm = [], torch.randperm

    def recorded(*args, **kwargs):
        order = randperm(*args, **kwargs)
        drawn.append(order.tolist())
        return order

    monkeypatch.setattr(torch, "randperm", recorded)
    for seed, step in ((0, 0), (1, 0), (0, 1)):
        t = trainer(tmp_path / f"{seed}-{step}", ppo_epochs=2, batch_size=20, mini_batch_size=20, seed=seed)
        t.step = step
        t.update([episode(t.items[0])], total=20, offset=0)  # 19 episodes of other ranks: a permutation of 20
    assert len(drawn) == 6 and all(sorted(order) == list(range(20)) for order in drawn)
    assert len({tuple(order) for order in drawn}) == 6  # each seed, step and PPO epoch shuffles its own way
    again = trainer(tmp_path / "again", ppo_epochs=2, batch_size=20, mini_batch_size=20, seed=0)
    again.update([episode(again.items[0])], total=20, offset=0)
    assert drawn[6:] == drawn[:2]  # and the same way again
