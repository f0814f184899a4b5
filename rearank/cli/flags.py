"""One spelling per idea on every command line: ``--output FILE`` for a file, ``--output-dir DIR`` for a folder.

A flag that was spelled otherwise keeps its old spelling as a hidden alias (accepted, not shown in ``--help``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


def add_renamed(container: Any, names: Sequence[str], old: Sequence[str], **kwargs: Any) -> argparse.Action:
    """Add the option ``names`` (shown in help) and the hidden aliases ``old`` writing the same ``dest``.

    ``container`` is a parser or an argument group. ``required=True`` holds for the option under any spelling
    (a required mutually exclusive group of the two, whose error names only the shown spelling).
    """
    required = kwargs.pop("required", False)
    target = container.add_mutually_exclusive_group(required=True) if required else container
    action = target.add_argument(*names, **kwargs)
    alias = {k: v for k, v in kwargs.items() if k in ("type", "metavar", "choices", "action", "nargs")}
    target.add_argument(*old, dest=action.dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **alias)
    return action
