"""Deterministic held-out answers for ``make train-learn``: the policy's first choice of id, read from one forward
pass per window.

The answer the recipe trains is ``[k]`` (tokens ``[``, ``k``, ``]``). One forward pass over the prompt followed by
``[`` gives the logits of both answer positions: the id answered is the argmax of the digit position's logits over
the window's ids ``1..N`` (N passages: 4, or 2 with ``--set-size 2``), which is what greedy decoding answers
whenever it starts with ``[`` and then names an id (``greedy_agrees``, recorded per item, says where it does), at a
fraction of generation's cost and with no sampling noise. An item's outcome (:func:`outcomes`): ``item`` (its
index), ``qid``, ``gold`` (1-based position of the best passage), ``answer`` (1-based), ``right``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

OPEN = "["


def first_ids(model: Any, tokenizer: Any, rows: Sequence[dict], *, size: int,
              batch: int = 32) -> list[tuple[int, bool]]:
    """Per row (a window of ``size`` passages): (the id answered, 1-based, among ``1..size``; whether greedy
    decoding's first two tokens are ``[`` and that id)."""
    import torch

    opening = tokenizer.encode(OPEN, add_special_tokens=False)
    digits = [tokenizer.encode(str(k), add_special_tokens=False) for k in range(1, size + 1)]
    if len(opening) != 1 or any(len(d) != 1 for d in digits):
        raise ValueError(f"the tokenizer splits {OPEN!r} or an id 1..{size} into several tokens")
    ids = torch.tensor([d[0] for d in digits])
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out: list[tuple[int, bool]] = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(rows), batch):
            seqs = [tokenizer.apply_chat_template([dict(m) for m in r["prompt"]], add_generation_prompt=True,
                                                  tokenize=True, return_dict=True)["input_ids"] + opening
                    for r in rows[start:start + batch]]
            width = max(map(len, seqs))
            inputs = torch.tensor([[pad] * (width - len(s)) + s for s in seqs])  # left padding
            mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs])
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=inputs, attention_mask=mask, position_ids=positions).logits[:, -2:, :]
            chosen = logits[:, 1, ids].argmax(-1)
            for row, pick in enumerate(chosen.tolist()):
                agrees = (int(logits[row, 0].argmax()) == opening[0]
                          and int(logits[row, 1].argmax()) == int(ids[pick]))
                out.append((pick + 1, agrees))
    return out


def outcomes(rows: Sequence[dict], answered: Sequence[tuple[int, bool]]) -> list[dict]:
    """One outcome per row, in row order."""
    return [{"item": int(r["extra_info"]["index"]), "qid": str(r["extra_info"]["qid"]),
             "gold": int(r["extra_info"]["target"]), "answer": answer, "right": answer == r["extra_info"]["target"],
             "greedy_agrees": agrees}
            for r, (answer, agrees) in zip(rows, answered, strict=True)]
