"""Moved to :mod:`rearank.methods.barrag.prompt`; this path stays an alias of it."""

import sys

from rearank.methods.barrag import prompt

sys.modules[__name__] = prompt
