"""A supervised warm start on (prompt ids, answer ids) pairs: the loss on the answer tokens only. Shared by the
tiny model's warm start (``make train-cpu``) and the SFT stage of ``make train-learn``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def train_on_answers(model: Any, examples: Sequence[tuple[list[int], list[int]]], steps: int, lr: float,
                     batch: int, pad_id: int, seed: int = 0, check: Callable[[int], bool] | None = None,
                     every: int = 0) -> list[float]:
    """Up to ``steps`` AdamW steps on right-padded batches of ``batch`` examples drawn at random (seeded); each
    answer's tokens are predicted from the prompt and the answer before them. ``check(step)`` runs after every
    ``every`` steps and ends the training when it returns True. Returns the loss of every step run."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for step in range(1, steps + 1):
        chosen = [examples[i] for i in torch.randint(len(examples), (batch,), generator=generator).tolist()]
        width = max(len(prompt) + len(answer) for prompt, answer in chosen)
        ids = torch.full((len(chosen), width), pad_id)
        mask = torch.zeros((len(chosen), width), dtype=torch.long)
        rows, positions, targets = [], [], []
        for row, (prompt, answer) in enumerate(chosen):
            ids[row, : len(prompt) + len(answer)] = torch.tensor(prompt + answer)
            mask[row, : len(prompt) + len(answer)] = 1
            rows += [row] * len(answer)
            positions += range(len(prompt) - 1, len(prompt) + len(answer) - 1)
            targets += answer
        hidden = model.model(input_ids=ids, attention_mask=mask).last_hidden_state[rows, positions]
        loss = torch.nn.functional.cross_entropy(model.lm_head(hidden), torch.tensor(targets))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if check is not None and step % every == 0 and check(step):
            break
    model.eval()
    return losses
