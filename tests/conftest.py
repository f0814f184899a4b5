"""Shared fixtures: where the real data packs are, and skip/fail rules when they are absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def data_root() -> Path:
    """The packs folder: $REARANK_DATA, else ../shared/data beside the checkout."""
    env = os.environ.get("REARANK_DATA")
    if env:
        return Path(env)
    return ROOT.parent / "shared" / "data"


def require_pack(relpath: str) -> Path:
    """Return the pack folder, skipping the test with a reason if it is absent (failing on CI)."""
    path = data_root() / relpath
    if not path.is_dir():
        msg = f"data pack {relpath!r} not found under {data_root()} (set REARANK_DATA to the packs folder)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture
def dl19() -> Path:
    return require_pack("msmarco-v1-passage/dl19")


@pytest.fixture
def dl21() -> Path:
    return require_pack("msmarco-v2-passage/dl21")


@pytest.fixture
def scifact() -> Path:
    return require_pack("beir/scifact")
