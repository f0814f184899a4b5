"""Moved to :mod:`rearank.methods.barrag.parser`; this path stays an alias of it."""

import sys

from rearank.methods.barrag import parser

sys.modules[__name__] = parser
