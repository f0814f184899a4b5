"""The engine: the one loop every method runs on (:mod:`.loop`, :class:`Engine`), its in-flight count
(:mod:`.concurrency`), its journal for resume window by window (:mod:`.journal`), and a backend that runs its
rounds on a Ray cluster (:mod:`.ray`, imported only by ``--engine ray``). The old module paths ``rearank.concurrency``, ``rearank.rounds`` and
``rearank.ray_engine`` stay aliases of the moved modules.
"""

from rearank.engine.loop import STREAM_POLL_S, THROTTLE_CHECK_S, Engine, EngineCounts, check_batch_size

__all__ = ["STREAM_POLL_S", "THROTTLE_CHECK_S", "Engine", "EngineCounts", "check_batch_size"]
