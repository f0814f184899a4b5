"""Moved to :mod:`rearank.run.files`; this path stays an alias of it."""

import sys

from rearank.run import files

sys.modules[__name__] = files
