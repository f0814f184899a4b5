"""Moved to :mod:`rearank.methods.groupwise.rbo`; this path stays an alias of it."""

import sys

from rearank.methods.groupwise import rbo

sys.modules[__name__] = rbo
