"""The engine: the one reranking loop (:mod:`.loop`, :class:`Engine`), its in-flight count (:mod:`.concurrency`),
the round-by-round engine with its journal (:mod:`.journal`) and its rounds on a Ray cluster (:mod:`.ray`, imported
only by ``--engine ray``). The old module paths ``rearank.concurrency``, ``rearank.rounds`` and
``rearank.ray_engine`` stay aliases of the moved modules.
"""

from rearank.engine.loop import STREAM_POLL_S, THROTTLE_CHECK_S, Engine, EngineCounts, check_batch_size

__all__ = ["STREAM_POLL_S", "THROTTLE_CHECK_S", "Engine", "EngineCounts", "check_batch_size"]
