"""Moved to :mod:`rearank.engine.ray`; this path stays an alias of it."""

import sys

from rearank.engine import ray

sys.modules[__name__] = ray
