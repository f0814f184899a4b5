"""Where rearank keeps what it builds once and reuses (converted models, BM25 indexes): the bottom layer."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The rearank cache: ``$REARANK_CACHE``, else ``~/.cache/rearank``."""
    env = os.environ.get("REARANK_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rearank"
