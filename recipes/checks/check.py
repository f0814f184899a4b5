"""``make train-check``: everything of the verl GRPO recipe short of GPU work, with the installed verl on CPU.

1. Both recipes compose with Hydra against verl's own config folder (as ``verl.trainer.main_ppo`` composes
   them) and pass verl's ``validate_config`` and the dataclass configs its workers build.
2. The synthesized parquet loads through verl's ``create_rl_dataset`` (``RLHFDataset``) with the embedded
   model's tokenizer, overlong-prompt filter on, and collates into a batch.
3. verl's reward loop worker (reward manager loaded by ``load_reward_manager`` from the recipe's
   ``reward.custom_reward_function``) scores tokenized completions -- ideal, presented and reversed orders,
   garbage -- through ``compute_score`` of ``pkg://rearank.methods.listwise.reward``; scores are checked against
   the reward's definition.
4. verl's GRPO advantage on those scores has the expected signs (ideal > 0, garbage < 0).

    python -m recipes.checks.check [--data DIR] [--rows N]

``--data``: a folder with train.parquet/val.parquet from ``rearank synth``; default ``data/rl/dl21`` if
present, else a small set synthesized from the dl21 pack into a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.methods.listwise.reward import compute_score
from rearank.methods.truth import parse_ground_truth
from recipes import RECIPES_DIR
from recipes.checks.completions import examples
from recipes.checks.data import rl_data_dir
from recipes.checks.table import STAGES

VERL_CONFIG = "pkg://verl.trainer.config"


class CheckFailed(RearankError):
    """A train-check step found the recipe, data or reward wiring wrong."""


def compose_recipe(name: str, overrides: Sequence[str] = ()) -> Any:
    """The recipe ``name`` (``rearank/grpo``: ``recipes/rearank/grpo.yaml``) as ``python -m verl.trainer.main_ppo
    --config-dir recipes/rearank --config-name grpo`` builds it."""
    from hydra import compose, initialize_config_dir

    path = RECIPES_DIR / f"{name}.yaml"
    with initialize_config_dir(config_dir=str(path.parent), version_base=None):
        return compose(config_name=path.stem, overrides=[f"hydra.searchpath=[{VERL_CONFIG}]", *overrides])


def validate_grpo(config: Any, validated: Any = None, reward: bool = True) -> tuple[Any, int]:
    """verl's ``validate_config`` (of ``validated``, default ``config``), its dataclass configs and the invariants
    every GRPO recipe keeps: no critic, a reference policy, batches that split over the GPUs, overlong prompts
    dropped, and (``reward``) a custom reward function that loads. Returns the rollout config and the number of
    GPUs."""
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.workers.config import RolloutConfig

    validated = config if validated is None else validated
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Disabled critic as adv_estimator != gae": intended
        use_critic = need_critic(validated)
    use_ref = need_reference_policy(validated)
    validate_config(validated, use_reference_policy=use_ref, use_critic=use_critic)
    algo = omega_conf_to_dataclass(config.algorithm)
    rollout = omega_conf_to_dataclass(config.actor_rollout_ref.rollout)
    _expect(isinstance(algo, AlgoConfig) and isinstance(rollout, RolloutConfig), "dataclass configs")

    data, actor, trainer = config.data, config.actor_rollout_ref.actor, config.trainer
    _expect(algo.adv_estimator == "grpo" and not use_critic, "GRPO without a critic")
    _expect(use_ref, "a reference policy for the KL loss")
    longest = data.max_prompt_length + data.max_response_length
    _expect(actor.ppo_max_token_len_per_gpu >= longest,
            f"actor.ppo_max_token_len_per_gpu ({actor.ppo_max_token_len_per_gpu}) >= prompt + response ({longest})")
    gpus = trainer.n_gpus_per_node * trainer.nnodes
    _expect(data.train_batch_size % actor.ppo_mini_batch_size == 0,
            f"train_batch_size ({data.train_batch_size}) is whole mini-batches of {actor.ppo_mini_batch_size}")
    _expect(actor.ppo_mini_batch_size * rollout.n % gpus == 0,
            f"a mini-batch ({actor.ppo_mini_batch_size} x {rollout.n} responses) splits evenly over {gpus} GPUs")
    _expect(gpus % rollout.tensor_model_parallel_size == 0,
            f"rollout tensor parallel size {rollout.tensor_model_parallel_size} divides {gpus} GPUs")
    _expect(data.filter_overlong_prompts, "overlong prompts are dropped, not left-truncated")
    _expect(not reward or get_custom_reward_fn(config) is not None, "reward.custom_reward_function.path is set")
    return rollout, gpus


def check_config(config: Any) -> str:
    """Run verl's own config validation and the recipe's invariants; return a one-line summary."""
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import CheckpointEngineConfig

    rollout, gpus = validate_grpo(config)
    engine = omega_conf_to_dataclass(config.actor_rollout_ref.rollout.checkpoint_engine)
    _expect(isinstance(engine, CheckpointEngineConfig), "checkpoint engine config")
    data, actor, trainer = config.data, config.actor_rollout_ref.actor, config.trainer
    _expect(rollout.prompt_length == data.max_prompt_length and rollout.response_length == data.max_response_length,
            "rollout lengths follow data lengths")
    reward_fn = get_custom_reward_fn(config)
    reward_fn(data_source="check", solution_str="[1]", ground_truth='{"labels": [1]}')  # raises on a bad option
    updates = data.train_batch_size // actor.ppo_mini_batch_size
    return (f"{gpus} GPU(s), {data.train_batch_size} prompts x {rollout.n} rollouts per step, "
            f"mini-batch {actor.ppo_mini_batch_size} ({updates} updates/step), KL {actor.kl_loss_coef} "
            f"({actor.kl_loss_type}), lr {actor.optim.lr} {actor.optim.lr_scheduler_type}, "
            f"{trainer.total_training_steps} steps, prompt {data.max_prompt_length} + response "
            f"{data.max_response_length} tokens, rollout TP {rollout.tensor_model_parallel_size}")


def local_config(model_dir: Path, data_dir: Path, overrides: Sequence[str] = ()) -> Any:
    """The full recipe pointed at a local model folder (for its tokenizer) and a synthesized data folder."""
    return compose_recipe("rearank/grpo", [
        f"actor_rollout_ref.model.path={model_dir}",
        f"data.train_files={data_dir / 'train.parquet'}",
        f"data.val_files={data_dir / 'val.parquet'}",
        *overrides,
    ])


def load_datasets(config: Any) -> tuple[Any, Any, Any]:
    """Tokenizer (through verl's HFModelConfig) and the train/val datasets as verl's trainer builds them."""
    from verl.trainer.ppo.utils import create_rl_dataset
    from verl.utils.config import omega_conf_to_dataclass

    model = omega_conf_to_dataclass(config.actor_rollout_ref.model)
    train = create_rl_dataset(config.data.train_files, config.data, model.tokenizer, model.processor, is_train=True)
    val = create_rl_dataset(config.data.val_files, config.data, model.tokenizer, model.processor, is_train=False)
    return model.tokenizer, train, val


def first_batch(config: Any, dataset: Any) -> dict[str, Any]:
    """One collated batch through verl's sampler and collate function."""
    from torchdata.stateful_dataloader import StatefulDataLoader
    from verl.trainer.ppo.utils import create_rl_sampler
    from verl.utils.dataset.rl_dataset import collate_fn

    loader = StatefulDataLoader(dataset, batch_size=min(config.data.train_batch_size, len(dataset)), num_workers=0,
                                drop_last=True, collate_fn=collate_fn, sampler=create_rl_sampler(config.data, dataset))
    return next(iter(loader))


def completion_batch(rows: Sequence[dict], tokenizer: Any, make: Callable[[Any], dict[str, str]]) -> tuple[
        Any, list[str], list[str]]:
    """A DataProto laid out as verl's trainer hands it to the reward loop: [prompt | response] masks, right-padded.

    Every row gets one response per kind that ``make`` writes for its decoded ground truth; returns the batch, the
    kind of each item and its completion text.
    """
    import numpy as np
    import torch
    from tensordict import TensorDict
    from verl import DataProto
    from verl.utils.tokenizer import normalize_token_ids

    prompts, responses, kinds, texts = [], [], [], []
    non_tensor: dict[str, list] = {"data_source": [], "reward_model": [], "extra_info": [], "uid": []}
    for row in rows:
        prompt_ids = normalize_token_ids(tokenizer.apply_chat_template(list(row["raw_prompt"]),
                                                                       add_generation_prompt=True, tokenize=True))
        for kind, text in make(json.loads(row["reward_model"]["ground_truth"])).items():
            prompts.append(torch.tensor(prompt_ids))
            responses.append(torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"]
                                          + [tokenizer.eos_token_id]))
            kinds.append(kind)
            texts.append(text)
            non_tensor["data_source"].append(row["data_source"])
            non_tensor["reward_model"].append(dict(row["reward_model"]))
            non_tensor["extra_info"].append(dict(row["extra_info"]))
            non_tensor["uid"].append(str(row["extra_info"]["index"]))

    def pad(seqs: list) -> tuple[Any, Any]:
        ids = torch.full((len(seqs), max(map(len, seqs))), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, s in enumerate(seqs):
            ids[i, : len(s)], mask[i, : len(s)] = s, 1
        return ids, mask

    prompt_ids, prompt_mask = pad(prompts)
    response_ids, response_mask = pad(responses)
    batch = TensorDict({"prompts": prompt_ids, "responses": response_ids, "response_mask": response_mask,
                        "attention_mask": torch.cat([prompt_mask, response_mask], dim=1)}, batch_size=len(prompts))
    return (DataProto(batch=batch, non_tensor_batch={k: np.array(v, dtype=object) for k, v in non_tensor.items()}),
            kinds, texts)


def score_with_verl(config: Any, data: Any) -> tuple[list[float], list[dict], Any]:
    """Scores and reward parts from verl's reward loop worker, and the token-level ``rm_scores`` it assembles."""
    from verl.experimental.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.reward import resolve_reward_manager_cls

    worker = RewardLoopWorker(config)
    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    scores = [float(out["reward_score"]) for out in outputs]
    rm_scores = resolve_reward_manager_cls(config).assemble_rm_scores(data, scores)
    return scores, [out["reward_extra_info"] for out in outputs], rm_scores


def grpo_advantages(config: Any, data: Any, rm_scores: Any) -> Any:
    """Per-response advantage (first response token) from verl's advantage computation with the recipe's estimator."""
    from verl.trainer.ppo.ray_trainer import compute_advantage

    data.batch["token_level_scores"] = rm_scores
    data.batch["token_level_rewards"] = rm_scores
    out = compute_advantage(data, adv_estimator=config.algorithm.adv_estimator, gamma=config.algorithm.gamma,
                            lam=config.algorithm.lam, num_repeat=config.actor_rollout_ref.rollout.n,
                            norm_adv_by_std_in_grpo=config.algorithm.norm_adv_by_std_in_grpo,
                            config=config.algorithm)
    return out.batch["advantages"][:, 0]


def check_scores(config: Any, data: Any, kinds: Sequence[str], texts: Sequence[str], name: str,
                 direct: Callable[[str, str], dict], expected: Callable[[str, Any], float | None]) -> tuple[
        list[float], list[dict], Any]:
    """Score ``data`` through verl's reward loop; each score must equal ``direct(text, ground_truth)`` and, where
    ``expected(kind, decoded ground truth)`` is a number, that number. Returns the scores, parts and GRPO advantages."""
    scores, parts, rm_scores = score_with_verl(config, data)
    for i, (kind, text, score) in enumerate(zip(kinds, texts, scores)):
        truth = data.non_tensor_batch["reward_model"][i]["ground_truth"]
        called = direct(text, truth)
        _expect(abs(score - called["score"]) < 1e-6, f"{name}: verl's score of the tokenized {kind} completion "
                f"({score:.4f}) equals the reward called on its text ({called['score']:.4f})")
        _expect(set(parts[i]) == set(called), f"{name}: reward parts reach verl: {sorted(parts[i])}")
        want = expected(kind, json.loads(truth))
        if want is not None:
            _expect(abs(score - want) < 1e-6, f"{name}: {kind} completion scores {want} (got {score:.4f})")
    return scores, parts, grpo_advantages(config, data, rm_scores)


def advantage_groups(data: Any, kinds: Sequence[str], advantages: Any) -> dict[str, dict[str, float]]:
    """Each prompt's (uid's) GRPO advantage by completion kind."""
    uids = data.non_tensor_batch["uid"]
    return {uid: {k: float(a) for k, a, u in zip(kinds, advantages, uids) if u == uid} for uid in dict.fromkeys(uids)}


def kind_lines(kinds: Sequence[str], scores: Sequence[float], advantages: Any, width: int,
               extra: Callable[[list[int]], str] = lambda idx: "") -> list[str]:
    """A report line a kind: its mean score and mean GRPO advantage (and ``extra`` of its items' indices)."""
    lines = []
    for kind in dict.fromkeys(kinds):
        idx = [i for i, k in enumerate(kinds) if k == kind]
        lines.append(f"  {kind:<{width}} mean score {sum(scores[i] for i in idx) / len(idx):+.3f}  mean GRPO advantage "
                     f"{sum(float(advantages[i]) for i in idx) / len(idx):+.3f}{extra(idx)}")
    return lines


def check_reward_and_advantage(config: Any, train: Any, tokenizer: Any, n_rows: int) -> list[str]:
    """Score real completions through verl and check scores and GRPO advantage signs; return report lines."""
    rows = [train[i] for i in range(len(train))]
    rows = [r for r in rows if _presented_not_ideal(r)][:n_rows] or rows[:n_rows]
    known = examples("rearank")
    data, kinds, texts = completion_batch(rows, tokenizer, known.make)
    reward_kwargs = config.reward.custom_reward_function.reward_kwargs
    scores, _, advantages = check_scores(
        config, data, kinds, texts, "rearank/grpo", lambda text, truth: compute_score("check", text, truth,
                                                                                     **reward_kwargs),
        known.expected)
    for uid, group in advantage_groups(data, kinds, advantages).items():
        _expect(group["ideal"] > 0 > group["garbage"], f"GRPO advantage signs in group {uid}: {group}")
    return [(f"{len(rows)} prompts x {len(set(kinds))} tokenized completions scored by verl's "
             f"'{config.reward.reward_manager.name}' reward manager through "
             "rearank.methods.listwise.reward.compute_score"),
            *kind_lines(kinds, scores, advantages, 9)]


def _presented_not_ideal(row: dict) -> bool:
    labels = parse_ground_truth(row["reward_model"]["ground_truth"])
    return labels is not None and list(labels) != sorted(labels, reverse=True)


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise CheckFailed(f"check failed: {what}")


def _parquet_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(path).metadata.num_rows


def run_checks(data_dir: Path, model_dir: Path, n_rows: int = 4) -> list[str]:
    """Every check in order; returns the report lines (raises CheckFailed at the first failure)."""
    lines = []
    for name in STAGES["rearank"].variants:
        lines.append(f"[ok] {name}: composes and validates -- {check_config(compose_recipe(name))}")
    kwargs = "reward.custom_reward_function.reward_kwargs"
    for override in ("rank_reward=absolute", "rank_reward=difference", "variant=released"):
        check_config(compose_recipe("rearank/grpo", [f"{kwargs}.{override}"]))
    two_nodes = check_config(compose_recipe("rearank/grpo", ["trainer.nnodes=2"]))
    lines.append(f"[ok] reward variants rank_reward=absolute/difference and variant=released accepted through "
                 f"reward_kwargs; 2 nodes: {two_nodes}")

    config = local_config(model_dir, data_dir)
    tokenizer, train, val = load_datasets(config)
    for split, dataset in (("train", train), ("val", val)):
        total = _parquet_rows(data_dir / f"{split}.parquet")
        _expect(len(dataset) == total, f"no {split} prompt longer than max_prompt_length={config.data.max_prompt_length} "
                f"with this tokenizer ({total - len(dataset)} of {total} dropped)")
    batch = first_batch(config, train)
    missing = {"raw_prompt", "reward_model", "data_source", "extra_info", "index"} - set(batch)
    _expect(not missing, f"collated batch has verl's fields (missing {sorted(missing)})")
    lines.append(f"[ok] RLHFDataset: {len(train)} train / {len(val)} val rows from {data_dir}, none over "
                 f"{config.data.max_prompt_length} prompt tokens; one batch of {len(batch['index'])} collated")

    lines += ["[ok] " + line if i == 0 else line
              for i, line in enumerate(check_reward_and_advantage(config, train, tokenizer, n_rows))]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, help="folder with train.parquet and val.parquet (rearank synth)")
    parser.add_argument("--rows", type=int, default=4, help="prompts to score through verl's reward loop (4)")
    args = parser.parse_args(argv)

    from rearank.backends.models import embedded_model_path

    started = time.perf_counter()
    try:
        model_dir = embedded_model_path()
        with tempfile.TemporaryDirectory(prefix="rearank-train-check-") as tmp:
            for line in run_checks(rl_data_dir(args.data, Path(tmp)), model_dir, args.rows):
                print(line, flush=True)
    except RearankError as err:
        print(f"train-check: {err}", file=sys.stderr)
        return 1
    print(f"train-check passed in {time.perf_counter() - started:.0f}s. Still GPU-only: rollout with vLLM, FSDP "
          "actor/ref forward-backward, weight sync, checkpoint save/resume, the TransferQueue-based v1 trainer loop "
          "(see docs/training.md).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
