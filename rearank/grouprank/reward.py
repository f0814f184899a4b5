"""Moved to :mod:`rearank.methods.groupwise.reward`. Recipes give verl this path
(``pkg://rearank.grouprank.reward``), which is that module; a load of this file by its path (verl's
``custom_reward_function.path``) finds the same functions here."""

import sys

from rearank.methods.groupwise import reward
from rearank.methods.groupwise.reward import *

if __name__ == "rearank.grouprank.reward":
    sys.modules[__name__] = reward
