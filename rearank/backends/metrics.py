"""A server's own load, read from its Prometheus ``/metrics`` page (vLLM, SGLang), for the in-flight controller.

vLLM exposes ``vllm:num_requests_running``, ``vllm:num_requests_waiting`` and ``vllm:kv_cache_usage_perc``
(``vllm:gpu_cache_usage_perc`` before 0.10), a fraction of the KV cache in use (0 to 1, despite the name); SGLang
(started with ``--enable-metrics``) exposes ``sglang:num_running_reqs``, ``sglang:num_queue_reqs`` and
``sglang:token_usage``. Samples of one name with several label sets (models, engines) are summed (requests) or
the largest one kept (cache use). :func:`read_totals` reads named counters the same way (benchmarks: tokens served,
prefix-cache hits).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

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


def metrics_url(base_url: str) -> str:
    """The ``/metrics`` page of the server behind an OpenAI-compatible base URL (``http://host:8000/v1``)."""
    parts = urlsplit(base_url)
    return urlunsplit((parts.scheme, parts.netloc, "/metrics", "", ""))


def samples(text: str) -> dict[str, list[float]]:
    """Each sample name's values (one a label set) in a Prometheus text page; ValueError when it does not parse."""
    values: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                values.setdefault(sample.name, []).append(float(sample.value))
    except (TypeError, IndexError) as err:
        raise ValueError(f"not a Prometheus text page: {err}") from None
    return values


def parse_load(text: str) -> ServerLoad | None:
    """The load in a Prometheus text page, or None when it reports no known running/waiting gauges (or does not
    parse as the text format)."""
    try:
        values = samples(text)
    except ValueError:
        return None
    for running, waiting, caches in _NAMES:
        if running in values and waiting in values:
            usage = next((max(values[name]) for name in caches if name in values), None)
            return ServerLoad(int(sum(values[running])), int(sum(values[waiting])), usage)
    return None


def read_totals(base_url: str, names: Sequence[str], timeout_s: float = 30.0) -> dict[str, float]:
    """Each of ``names`` (sample names, e.g. ``vllm:prompt_tokens_total``) summed over its label sets on the
    ``/metrics`` page of the server behind ``base_url``; 0 for a name the page lacks."""
    import httpx

    response = httpx.get(metrics_url(base_url), timeout=timeout_s)
    response.raise_for_status()
    values = samples(response.text)
    return {name: sum(values.get(name, ())) for name in names}
