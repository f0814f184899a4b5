"""Moved to :mod:`rearank.methods.groupwise.labels`; this path stays an alias of it."""

import sys

from rearank.methods.groupwise import labels

sys.modules[__name__] = labels
