"""verl SFT dataset for GroupRank rows: the loss on the final assistant turn only.

The groupwise prompt (rearank/methods/groupwise/grouprank.yaml) gives each document its own user turn followed by an
assistant acknowledgement ("Received document [i]."). verl 0.9.1's ``MultiTurnSFTDataset`` trains on every assistant
turn; these acknowledgements are part of the prompt, so this subclass masks all but the last turn, the teacher's
``<reason>``/``<answer>``. ``recipes/grouprank/sft.yaml`` selects it with ``data.custom_cls``.
"""

from __future__ import annotations

from typing import Any

import torch
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset


class LastTurnSFTDataset(MultiTurnSFTDataset):
    """``MultiTurnSFTDataset`` whose loss mask keeps the last message only."""

    def _process_single_message(self, index: int, message: dict[str, Any], full_message: list, tools: Any = None,
                                enable_thinking: bool | None = None) -> tuple[Any, Any, Any, Any]:
        ids, mask, attention, inputs = super()._process_single_message(
            index=index, message=message, full_message=full_message, tools=tools, enable_thinking=enable_thinking)
        if index != len(full_message) - 1:
            mask = torch.zeros_like(mask)
        return ids, mask, attention, inputs
