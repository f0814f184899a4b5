"""Moved to :mod:`rearank.engine.concurrency`; this path stays an alias of it."""

import sys

from rearank.engine import concurrency

sys.modules[__name__] = concurrency
