"""One typed run configuration: the backend, model, method and sampling of a rerank run or a benchmark suite.

The command line reads its flags into a :class:`RunConfig` once (:func:`rearank.flags.run_config`) and hands that
on, not the argparse namespace. It checks every setting when built, before a model loads, builds the method and
the backend, and records its settings flat (``record``) for the stats and ``suite.json``; :func:`resume_settings`
is the one list of the recorded settings a resume must match.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from rearank.backends import registry
from rearank.backends.base import AUTO, Backend, SamplingSettings
from rearank.backends.models import is_embedded
from rearank.engine import Engine, check_batch_size
from rearank.errors import RearankError
from rearank.methods import METHODS, Method, method_options, option_default

#: Generation budget: enough for a 7B reasoning reranker's analysis of 20 passages.
DEFAULT_MAX_NEW_TOKENS = 2048
#: Budget with the embedded 135M model, which cannot reason usefully anyway: keeps a CPU run to minutes.
EMBEDDED_MAX_NEW_TOKENS = 256
#: The settings a resumed run must share with the run it continues, beside its method's own options: its inputs,
#: model, sampling and method (:func:`resume_settings`). The one list, for ``rearank rerank`` (the stats' config),
#: its ``--engine ray`` round journal and ``rearank benchmark`` (``suite.json``); anything else (output paths,
#: progress, the batch size, how many queries) may change between a run and its resume.
RESUME_KEYS = ("dataset", "run", "requests", "topics", "docs", "skip_missing", "tag", "backend", "model",
               "backend_options", "method", "template", "top_k", "passage_budget", "max_new_tokens",
               "temperature", "top_p", "seed", "reasoning")
#: What a resumed ``rearank benchmark`` suite must also share: how many queries each dataset's metrics count,
#: and the first stage they rerank.
SUITE_RESUME_KEYS = ("max_queries", "first_stage")


def resume_settings(config: Mapping[str, Any], suite: bool = False,
                    source: object = "the recorded run") -> dict[str, Any]:
    """The settings of ``config`` (a run's recorded settings) that a resume must match: :data:`RESUME_KEYS`, the
    options of its ``method`` (:func:`rearank.methods.method_options`) and, for a benchmark suite,
    :data:`SUITE_RESUME_KEYS`.

    A record that names its method ``mode`` (an earlier rearank's key) is refused with a
    :class:`~rearank.errors.RearankError` naming ``source``: its settings cannot be compared.
    """
    if "mode" in config:
        raise RearankError(f"{source} records its method under 'mode' (an earlier rearank's key), so the run cannot "
                           "be resumed: start a new output folder (or --output file) and run without --resume")
    method = config.get("method")
    own = method_options(method) if method in METHODS else []
    keys = (*RESUME_KEYS, *own, *(SUITE_RESUME_KEYS if suite else ()))
    return {key: config.get(key) for key in dict.fromkeys(keys)}


def default_max_new_tokens(backend: str, model: str | None) -> int:
    """The generation budget when none is given: smaller for the embedded model on the hf backend."""
    return EMBEDDED_MAX_NEW_TOKENS if backend == "hf" and is_embedded(model) else DEFAULT_MAX_NEW_TOKENS


@dataclass(frozen=True)
class RunConfig:
    """What a run ranks with: ``backend`` and ``model`` (with ``backend_options``), the registered ``method`` and
    its ``options`` (by their field names; None takes the method's default), the
    ``sampling`` (greedy by default; :func:`default_max_new_tokens` gives the budget for a model) and the engine's
    ``batch_size``."""

    backend: str = "hf"
    model: str | None = None
    method: str = "listwise"
    options: Mapping[str, Any] = field(default_factory=dict)
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    batch_size: int = 32

    def __post_init__(self) -> None:
        registry.BACKENDS.get_or_raise(self.backend)
        METHODS.get_or_raise(self.method)
        unknown = sorted(set(self.options) - set(method_options(self.method)))
        if unknown:
            raise RearankError(f"{', '.join(unknown)}: not an option of the {self.method} method; it takes: "
                               f"{', '.join(method_options(self.method))}")
        check_batch_size(self.batch_size)
        self.ranking_method  # noqa: B018 (a bad method option fails now, before any model loads)
        if self.method == "pointwise" and self.backend == "scorer" and self.ranking_method.reasoning:
            raise RearankError("--reasoning on asks an LLM to reason before its yes/no; the scorer backend scores "
                               "(query, passage) pairs without generating: add --backend hf, vllm or openai")

    @cached_property
    def ranking_method(self) -> Method:
        """The method, built from the options given (checked by the method)."""
        given = {key: value for key, value in self.options.items() if value is not None}
        try:
            return METHODS[self.method](**given)
        except TypeError as err:
            raise RearankError(f"bad {self.method} option ({err})") from None

    def backend_kwargs(self, qrels: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Any]:
        """The keyword options the backend is built with: the oracle's also take ``qrels`` (an error without)."""
        options = dict(self.backend_options)
        if self.backend == "oracle":
            if qrels is None:
                raise RearankError("the oracle backend ranks by relevance judgments: pass --qrels "
                                   "(or a --dataset with qrels)")
            options["qrels"] = qrels
        return options

    def check_backend(self) -> None:
        """Check the model and the backend options against the backend (kinds, ranges, a device this machine has)
        without loading anything: what a command does before it writes a file."""
        registry.backend_class(self.backend, self.model, **self.backend_kwargs({}))

    def make_backend(self, qrels: Mapping[str, Mapping[str, int]] | None = None) -> Backend:
        """Build the backend (loads the model); the oracle judges by ``qrels``."""
        return registry.make_backend(self.backend, self.model, **self.backend_kwargs(qrels))

    @property
    def concurrency(self) -> int | str:
        """The engine's windows in flight on a concurrent backend: ``-O concurrency`` (default ``auto``)."""
        return self.backend_options.get("concurrency", AUTO)

    def engine(self, backend: Backend) -> Engine:
        """The engine running the method on ``backend`` with these sampling settings, batch size and concurrency."""
        return Engine(backend, self.ranking_method, self.sampling, batch_size=self.batch_size,
                      concurrency=self.concurrency)

    def record(self) -> dict[str, Any]:
        """The settings as recorded in stats and ``suite.json``: flat, the method under ``method``, its options under
        their field names (an option not given by its default)."""
        options = {key: option_default(self.method, key) if self.options.get(key) is None else self.options[key]
                   for key in method_options(self.method)}
        if "reasoning" in options:  # what the method does (the template's own when not given), as a bool
            options["reasoning"] = self.ranking_method.reasoning
        sampling = self.sampling
        return {"backend": self.backend, "model": self.model, "backend_options": dict(self.backend_options),
                "method": self.method, **options, "max_new_tokens": sampling.max_new_tokens,
                "temperature": sampling.temperature, "top_p": sampling.top_p, "seed": sampling.seed,
                "batch_size": self.batch_size}
