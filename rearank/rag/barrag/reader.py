"""Moved to :mod:`rearank.methods.barrag.reader`; this path stays an alias of it."""

import sys

from rearank.methods.barrag import reader

sys.modules[__name__] = reader
