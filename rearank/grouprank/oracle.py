"""Moved to :mod:`rearank.methods.groupwise.oracle`; this path stays an alias of it."""

import sys

from rearank.methods.groupwise import oracle

sys.modules[__name__] = oracle
