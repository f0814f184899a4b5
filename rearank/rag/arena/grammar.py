"""Moved to :mod:`rearank.methods.arena.grammar`; this path stays an alias of it."""

import sys

from rearank.methods.arena import grammar

sys.modules[__name__] = grammar
