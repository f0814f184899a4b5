"""Moved to :mod:`rearank.run.stats`; this path stays an alias of it."""

import sys

from rearank.run import stats

sys.modules[__name__] = stats
