"""Moved to :mod:`rearank.methods.arena.reward`. Recipes give verl this path
(``pkg://rearank.rag.arena.reward``), which is that module; a load of this file by its path (verl's
``custom_reward_function.path``) finds the same functions here."""

import sys

from rearank.methods.arena import reward
from rearank.methods.arena.reward import *

if __name__ == "rearank.rag.arena.reward":
    sys.modules[__name__] = reward
