"""The engine: the one loop every method runs on (:mod:`.loop`, :class:`Engine`), its in-flight count
(:mod:`.concurrency`) and its journal for resume window by window (:mod:`.journal`). Rounds on a Ray cluster are a
backend of this loop (:mod:`rearank.backends.ray`, imported only by ``--engine ray``).
"""

from rearank.engine.loop import STREAM_POLL_S, THROTTLE_CHECK_S, Engine, EngineCounts, check_batch_size

__all__ = ["STREAM_POLL_S", "THROTTLE_CHECK_S", "Engine", "EngineCounts", "check_batch_size"]
