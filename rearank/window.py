"""Moved to :mod:`rearank.methods.listwise.window`; this path stays an alias of it."""

import sys

from rearank.methods.listwise import window

sys.modules[__name__] = window
