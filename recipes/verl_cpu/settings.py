"""The switch and the names the CPU plugin registers under (no verl import here)."""

from __future__ import annotations

import os

#: The value of ``VERL_PLATFORM`` that turns the plugin on (and the platform name it registers).
PLATFORM = "cpu"
#: ``actor_rollout_ref.rollout.name`` of the transformers rollout.
ROLLOUT = "transformers"


def enabled() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM
