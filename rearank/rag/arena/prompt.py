"""Moved to :mod:`rearank.methods.arena.prompt`; this path stays an alias of it."""

import sys

from rearank.methods.arena import prompt

sys.modules[__name__] = prompt
