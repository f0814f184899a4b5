"""A server's own load, read from its Prometheus ``/metrics`` page (vLLM, SGLang), for the in-flight controller.

vLLM exposes ``vllm:num_requests_running``, ``vllm:num_requests_waiting`` and ``vllm:kv_cache_usage_perc``
(``vllm:gpu_cache_usage_perc`` before 0.10), a fraction of the KV cache in use (0 to 1, despite the name); SGLang
(started with ``--enable-metrics``) exposes ``sglang:num_running_reqs``, ``sglang:num_queue_reqs`` and
``sglang:token_usage``. Samples of one name with several label sets (models, engines) are summed (requests) or
the largest one kept (cache use).
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

#: (running, waiting, cache use) metric names of each server, first name found wins.
_NAMES = (
    ("vllm:num_requests_running", "vllm:num_requests_waiting", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")),
    ("sglang:num_running_reqs", "sglang:num_queue_reqs", ("sglang:token_usage",)),
)


@dataclass(frozen=True)
class ServerLoad:
    """Requests the server runs now, requests it holds waiting, and the share of its KV cache in use (None:
    not reported)."""

    running: int
    waiting: int
    kv_usage: float | None = None


def parse_load(text: str) -> ServerLoad | None:
    """The load in a Prometheus text page, or None when it reports no known running/waiting gauges (or does not
    parse as the text format)."""
    values: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                values.setdefault(sample.name, []).append(float(sample.value))
    except (ValueError, TypeError, IndexError):
        return None
    for running, waiting, caches in _NAMES:
        if running in values and waiting in values:
            usage = next((max(values[name]) for name in caches if name in values), None)
            return ServerLoad(int(sum(values[running])), int(sum(values[waiting])), usage)
    return None
