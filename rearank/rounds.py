"""Moved to :mod:`rearank.engine.journal`; this path stays an alias of it."""

import sys

from rearank.engine import journal

sys.modules[__name__] = journal
