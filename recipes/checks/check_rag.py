"""``make train-check`` for the RAG recipes (BAR-RAG selector and generator, ARENA), with the installed verl on CPU.

For each recipe and its one-GPU debug variant:

1. it composes with Hydra against verl's config folder and passes verl's ``validate_config`` and dataclass configs
   (the LoRA recipes are validated with ``lora_rank=0`` because verl's vLLM LoRA check imports vLLM; their rank is
   checked against vLLM's allowed ranks here instead);
2. rows synthesized from the shared QA samples (``rearank synth --method ...``) load through verl's
   ``create_rl_dataset`` (``RLHFDataset``) with the embedded model's tokenizer and collate into a batch;
3. verl's reward loop worker (naive reward manager, the recipe's ``custom_reward_function``) scores tokenized
   completions of known kinds; every score must equal the reward function called directly, and fixed kinds must
   score their hand-derived values. The selector's async reward is awaited by verl and asks the noisy-oracle reader
   (``python -m rearank.backends.chat_server --backend qa-oracle``) on 127.0.0.1; a reader that is down scores
   -0.5, counted;
4. verl's GRPO advantage on those scores has the expected signs (best kind > 0 > garbage).

``--card NAME`` checks one method card instead, any package's (a RAG method with no recipe of rearank's): its rows
from the shared QA sample, and its example completions scored by its reward loaded as verl loads a
``custom_reward_function``, the fixed kinds at their values and the best kind above the others.

    python -m recipes.checks.check_rag [--rows N] [--card NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rearank.errors import RearankError
from rearank.methods.card import SELECTOR, card
from rearank.testing.ports import free_port
from recipes.checks.check import (
    _expect,
    advantage_groups,
    check_scores,
    completion_batch,
    compose_recipe,
    first_batch,
    kind_lines,
    load_datasets,
    score_with_verl,
    validate_grpo,
)
from recipes.checks.completions import examples
from recipes.checks.data import shared
from recipes.checks.serving import reader_server
from recipes.checks.table import RAG_STAGES, Stage

#: vLLM's allowed LoRA ranks (verl's fallback list when vLLM is not installed).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def check_rag_config(config: Any) -> str:
    """verl's validation (LoRA rank checked here, not through vLLM) and the recipe's invariants; a summary line."""
    from omegaconf import open_dict

    lora_rank = int(config.actor_rollout_ref.model.get("lora_rank", 0))
    if lora_rank:
        _expect(lora_rank in VLLM_LORA_RANKS, f"LoRA rank {lora_rank} is one vLLM accepts {VLLM_LORA_RANKS}")
    checked = config.copy()
    with open_dict(checked):
        checked.actor_rollout_ref.model.lora_rank = 0
    rollout, gpus = validate_grpo(config, checked)
    data, actor = config.data, config.actor_rollout_ref.actor
    lora = f", LoRA {lora_rank}/{config.actor_rollout_ref.model.lora_alpha}" if lora_rank else ", full fine-tuning"
    return (f"{gpus} GPU(s), {data.train_batch_size} prompts x {rollout.n} rollouts, lr {actor.optim.lr}, "
            f"KL {actor.kl_loss_type} {actor.kl_loss_coef}{lora}, prompt {data.max_prompt_length} + response "
            f"{data.max_response_length}")


def synthesize(stage: Stage, out: Path) -> Path:
    """The stage's rows from its QA samples, as ``rearank synth --method MODE --qa ...`` writes them."""
    from data_synthesis.qa_rows import QARowsConfig, qa_rows, write_qa_outputs
    from rearank.io.qa import load_qa

    files = [str(shared(name)) for name in stage.check_qa]
    items = [item for path in files for item in load_qa(path, limit=40)]
    config = QARowsConfig(method=stage.card, val_fraction=0.1, seed=0)
    rows, skipped = qa_rows(items, config)
    write_qa_outputs(rows, skipped, out, config, files)
    return out


def direct_score(config: Any, text: str, ground_truth: str) -> dict:
    """The reward function called directly with the recipe's reward_kwargs (awaited when async)."""
    from verl.trainer.ppo.reward import get_custom_reward_fn

    result = get_custom_reward_fn(config)(data_source="check", solution_str=text, ground_truth=ground_truth)
    return asyncio.run(result) if asyncio.iscoroutine(result) else result


def check_rewards(config: Any, stage: Stage, rows: Sequence[dict], tokenizer: Any) -> list[str]:
    """Score known completions through verl's reward loop; check against direct calls, fixed values, advantages."""
    mode, known = stage.card, examples(stage.name)
    selector = card(stage.card).kind == SELECTOR
    make, expected, best = known.make, known.expected, known.best
    data, kinds, texts = completion_batch(rows, tokenizer, make)
    scores, parts, advantages = check_scores(config, data, kinds, texts, mode,
                                             lambda text, truth: direct_score(config, text, truth), expected)
    for uid, group in advantage_groups(data, kinds, advantages).items():
        _expect(group["garbage"] < 0, f"{mode}: garbage has a negative GRPO advantage in group {uid}: {group}")
        if not selector:  # a selector's score depends on the reader's draws
            _expect(group[best] > 0, f"{mode}: {best} has a positive GRPO advantage in group {uid}: {group}")

    def mean_p(idx: list[int]) -> str:
        return f"  mean p {sum(parts[i]['p'] for i in idx) / len(idx):.2f}" if selector else ""

    return [(f"verl's reward loop scored {len(rows)} prompts x {len(set(kinds))} completions through "
             f"{config.reward.custom_reward_function.name}"), *kind_lines(kinds, scores, advantages, 13, mean_p)]


# ---------------------------------------------------------------------------------------- driver


def check_recipe(stage: Stage, data_dir: Path, model_dir: Path, n_rows: int, reader_url: str | None) -> list[str]:
    """All checks of one recipe family; returns its report lines."""
    name = stage.recipe
    lines = [f"[ok] {variant}: composes and validates -- {check_rag_config(compose_recipe(variant))}"
             for variant in stage.variants]
    overrides = [f"actor_rollout_ref.model.path={model_dir}", f"data.train_files={data_dir / 'train.parquet'}",
                 f"data.val_files={data_dir / 'val.parquet'}", "data.max_prompt_length=8192",
                 "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=10240"]
    if reader_url:
        overrides.append(f"reward.custom_reward_function.reward_kwargs.reader_url={reader_url}")
    config = compose_recipe(name, overrides)
    tokenizer, train, val = load_datasets(config)
    batch = first_batch(config, train)
    missing = {"raw_prompt", "reward_model", "data_source", "extra_info", "index"} - set(batch)
    _expect(not missing, f"collated batch has verl's fields (missing {sorted(missing)})")
    lines.append(f"[ok] {name}: RLHFDataset loads {len(train)} train / {len(val)} val rows; a batch of "
                 f"{len(batch['index'])} collates")
    rows = [train[i] for i in range(min(n_rows, len(train)))]
    lines += [f"[ok] {name}: " + line if i == 0 else line
              for i, line in enumerate(check_rewards(config, stage, rows, tokenizer))]
    return lines


def check_reader_failure(model_dir: Path, data_dir: Path) -> str:
    """A reader that is down: the selector reward scores -0.5 and counts the failure, through verl."""
    from rearank.methods.barrag.reward import READER_FAILURES

    dead = f"http://127.0.0.1:{free_port()}/v1"
    config = compose_recipe("barrag/selector_grpo", [
        f"actor_rollout_ref.model.path={model_dir}", f"data.train_files={data_dir / 'train.parquet'}",
        f"data.val_files={data_dir / 'val.parquet'}", "data.max_prompt_length=8192",
        f"reward.custom_reward_function.reward_kwargs.reader_url={dead}",
        "reward.custom_reward_function.reward_kwargs.timeout_s=2",
        "reward.custom_reward_function.reward_kwargs.reader_retries=0"])
    tokenizer, train, _ = load_datasets(config)
    data, kinds, _ = completion_batch([train[0]], tokenizer, examples("barrag_selector").make)
    before = sum(READER_FAILURES.values())
    scores, parts, _ = score_with_verl(config, data)
    got = {k: (s, p["reader_failed"]) for k, s, p in zip(kinds, scores, parts)}
    _expect(got["supporting"] == (-0.5, 1.0) and got["distractors"] == (-0.5, 1.0),
            f"a dead reader scores -0.5 with reader_failed 1 ({got})")
    _expect(got["garbage"] == (0.0, 0.0), "the gate comes before the reader")
    return (f"[ok] barrag/selector_grpo: a reader that is down scores -0.5, counted "
            f"({sum(READER_FAILURES.values()) - before} failures), never a crash")


def check_card(name: str, n_rows: int = 3) -> list[str]:
    """The rows and reward of card ``name`` (see the module docstring); its report lines."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from data_synthesis.qa_rows import QARowsConfig, qa_rows
    from rearank.io.qa import load_qa
    from recipes.checks.table import QA

    method = card(name)
    _expect(method.synth == "qa" and method.reward is not None and method.examples is not None,
            f"card {name} builds rows from QA files and declares a reward and example completions")
    rows, _ = qa_rows(load_qa(str(shared(QA)), limit=n_rows), QARowsConfig(method=name, val_fraction=0.0))
    _expect(len(rows) == n_rows, f"card {name}: {n_rows} rows from {QA} (got {len(rows)})")
    path, function = method.reward
    reward = get_custom_reward_fn(OmegaConf.create({"reward": {"custom_reward_function": {"path": path,
                                                                                          "name": function}}}))
    examples_ = method.examples
    scored = 0
    for row in rows:
        truth = row["reward_model"]["ground_truth"]
        scores = {kind: float(reward(data_source=row["data_source"], solution_str=text, ground_truth=truth))
                  for kind, text in examples_.make(json.loads(truth)).items()}
        for kind, score in scores.items():
            want = examples_.expected(kind, json.loads(truth))
            _expect(want is None or score == want, f"card {name}: {kind} scores {want} (got {score})")
        best = scores[examples_.best]
        _expect(all(best > s for k, s in scores.items() if k != examples_.best),
                f"card {name}: {examples_.best} scores above every other kind ({scores})")
        scored += len(scores)
    return [(f"[ok] card {name}: {len(rows)} rows; {scored} example completions scored by {path}:{function} as verl "
             "loads it, fixed kinds at their values, the best above the rest")]


def run_checks(scratch: Path, model_dir: Path, n_rows: int = 3) -> list[str]:
    lines = []
    for stage in RAG_STAGES:
        data_dir = synthesize(stage, scratch / stage.card)
        if card(stage.card).kind == SELECTOR:  # its reward asks a reader
            with reader_server(shared(stage.check_qa[0])) as reader_url:
                lines += check_recipe(stage, data_dir, model_dir, n_rows, reader_url)
            lines.append(check_reader_failure(model_dir, data_dir))
        else:
            lines += check_recipe(stage, data_dir, model_dir, n_rows, None)
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=3, help="prompts per recipe scored through verl (3)")
    parser.add_argument("--card", metavar="NAME", help="check this method card's rows and reward instead (e.g. a "
                        "plugin's RAG method)")
    args = parser.parse_args(argv)
    if args.card:
        try:
            print("\n".join(check_card(args.card, args.rows)))
        except RearankError as err:
            print(f"train-check-rag: {err}", file=sys.stderr)
            return 1
        return 0
    from rearank.backends.models import embedded_model_path

    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="rearank-train-check-rag-") as tmp:
            for line in run_checks(Path(tmp), embedded_model_path(), args.rows):
                print(line, flush=True)
    except RearankError as err:
        print(f"train-check-rag: {err}", file=sys.stderr)
        return 1
    print(f"train-check (RAG recipes) passed in {time.perf_counter() - started:.0f}s. Still GPU-only: vLLM rollout "
          "with LoRA weight sync, the vLLM LoRA-rank check, FSDP forward-backward, a real reader (docs/rag_training.md).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
