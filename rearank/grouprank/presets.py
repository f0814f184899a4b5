"""Moved to :mod:`rearank.methods.groupwise.presets`; this path stays an alias of it."""

import sys

from rearank.methods.groupwise import presets

sys.modules[__name__] = presets
