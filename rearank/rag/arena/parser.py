"""Moved to :mod:`rearank.methods.arena.parser`; this path stays an alias of it."""

import sys

from rearank.methods.arena import parser

sys.modules[__name__] = parser
