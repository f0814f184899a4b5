"""Moved to :mod:`rearank.run.job`; this path stays an alias of it."""

import sys

from rearank.run import job

sys.modules[__name__] = job
