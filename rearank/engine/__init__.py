"""The engine: the one loop every method runs on (:mod:`.loop`, :class:`Engine`), its in-flight count
(:mod:`.concurrency`), its journal for resume window by window (:mod:`.journal`), and a backend that runs its
rounds on a Ray cluster (:mod:`.ray`, imported only by ``--engine ray``).
"""

from rearank.engine.loop import STREAM_POLL_S, THROTTLE_CHECK_S, Engine, EngineCounts, check_batch_size

__all__ = ["STREAM_POLL_S", "THROTTLE_CHECK_S", "Engine", "EngineCounts", "check_batch_size"]
