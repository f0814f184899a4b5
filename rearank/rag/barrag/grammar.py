"""Moved to :mod:`rearank.methods.barrag.grammar`; this path stays an alias of it."""

import sys

from rearank.methods.barrag import grammar

sys.modules[__name__] = grammar
