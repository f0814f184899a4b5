"""Moved to :mod:`rearank.methods.listwise.reward`. Recipes give verl this path
(``pkg://rearank.reward``), which is that module; a load of this file by its path (verl's
``custom_reward_function.path``) finds the same functions here."""

import sys

from rearank.methods.listwise import reward
from rearank.methods.listwise.reward import *

if __name__ == "rearank.reward":
    sys.modules[__name__] = reward
