"""Moved to :mod:`rearank.methods.barrag.reward`. Recipes give verl this path
(``pkg://rearank.rag.barrag.reward``), which is that module; a load of this file by its path (verl's
``custom_reward_function.path``) finds the same functions here."""

import sys

from rearank.methods.barrag import reward
from rearank.methods.barrag.reward import *

if __name__ == "rearank.rag.barrag.reward":
    sys.modules[__name__] = reward
