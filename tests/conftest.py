"""Shared fixtures: where the real data packs are, and skip/fail rules when they (or a module) are absent.

Developers with a partial install get a skip with its reason; on CI (``CI`` set, as ``.ci/run`` does) an absent
pack or module is a failure, so a broken install can never pass as a green run with skips.
"""

from __future__ import annotations

import importlib
import locale
import os
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[1]


def data_root() -> Path:
    """The packs folder: $REARANK_DATA, else ../shared/data beside the checkout."""
    env = os.environ.get("REARANK_DATA")
    if env:
        return Path(env)
    return ROOT.parent / "shared" / "data"


def on_ci() -> bool:
    """Whether the tests run on CI (``CI`` set to anything but empty, ``0`` or ``false``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


# Timing never decides an outcome: no per-example deadline and no too-slow health check (CPU-bound properties on a
# busy machine are slow, not wrong). Locally Hypothesis explores new examples on each run and replays failures
# from its database (.hypothesis/); on CI every run draws the same examples (derandomized, no database), so a
# push cannot turn CI red by luck. A failure found locally is kept as an @example on its test (docs/testing.md).
# (Hypothesis loads a built-in "ci" profile when CI is set; ours replaces it, so the choice is made here.)
settings.register_profile("rearank", parent=settings.get_profile("default"), deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", parent=settings.get_profile("rearank"), derandomize=True, database=None,
                          print_blob=True)
settings.load_profile("ci" if on_ci() else "rearank")


def absent(reason: str) -> None:
    """Skip the test with ``reason`` for a developer's partial install; fail it on CI."""
    if on_ci():
        pytest.fail(f"{reason} (CI must have it: a missing dependency fails, it does not skip)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_pack(relpath: str) -> Path:
    """Return the pack folder, skipping the test with a reason if it is absent (failing on CI)."""
    path = data_root() / relpath
    if not path.is_dir():
        absent(f"data pack {relpath!r} not found under {data_root()} (set REARANK_DATA to the packs folder)")
    return path


def require(module: str, reason: str = "") -> ModuleType:
    """Import and return a third-party ``module``; if it cannot be imported, skip with a reason (fail on CI).

    Only for optional dependencies (verl, hydra, vllm...); the project's own modules are imported plainly,
    so that an error in them fails the test.
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        absent(f"{module} cannot be imported ({err}){': ' + reason if reason else ''}")
        raise  # unreachable: absent() always raises


@pytest.fixture
def dl19() -> Path:
    return require_pack("msmarco-v1-passage/dl19")


@pytest.fixture
def dl21() -> Path:
    return require_pack("msmarco-v2-passage/dl21")


@pytest.fixture
def scifact() -> Path:
    return require_pack("beir/scifact")


@pytest.fixture
def ascii_locale():
    """The C locale's ASCII as the default text encoding for the test, restored after: a file opened without an
    explicit encoding then cannot hold non-ASCII text, so the test shows the file is UTF-8 whatever the user's
    locale (Windows' cp1252, a Latin-1 locale). Under Python's UTF-8 mode the default stays UTF-8 anyway."""
    saved = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, saved)
