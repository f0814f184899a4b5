"""Moved to :mod:`rearank.methods.listwise.answer`; this path stays an alias of it."""

import sys

from rearank.methods.listwise import answer

sys.modules[__name__] = answer
