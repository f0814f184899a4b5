"""Moved to :mod:`rearank.methods.groupwise.parser`; this path stays an alias of it."""

import sys

from rearank.methods.groupwise import parser

sys.modules[__name__] = parser
