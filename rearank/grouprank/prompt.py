"""Moved to :mod:`rearank.methods.groupwise.prompt`; this path stays an alias of it."""

import sys

from rearank.methods.groupwise import prompt

sys.modules[__name__] = prompt
