"""One typed run configuration: the backend, model, method and sampling of a rerank run or a benchmark suite.

Every face builds its run with one function, :meth:`RunConfig.build`, which sorts keyword options by the fields each
part declares (sampling, the method, the engine; the rest go to the backend): the command line
(:func:`rearank.flags.run_config`, which hands the config on, not the argparse namespace), ``Reranker``, ``serve``
(through ``Reranker``) and the RAG selectors of a ranking method. A config checks every setting when built, before
a model loads, builds the method and the backend, and records its settings flat (``record``) for the stats and
``suite.json``; :func:`resume_settings` is the one list of the recorded settings a resume must match.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

from rearank.backends import registry
from rearank.backends.base import AUTO, SCORER, Backend, SamplingSettings
from rearank.backends.models import is_embedded
from rearank.engine import Engine, check_batch_size
from rearank.errors import RearankError
from rearank.methods import METHODS, Method, method_options, option_default
from rearank.methods.card import card

#: The backend of a run that names none, unless its method's card declares another (``backend``).
DEFAULT_BACKEND = "hf"
#: The engine's options a run takes by keyword, beside the sampling's and the method's (:meth:`RunConfig.build`).
ENGINE_OPTIONS = ("batch_size", "in_flight")
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
    """The generation budget when none is given: smaller for the embedded model on a backend that declares
    ``EMBEDDED_SHORT_BUDGET`` (hf)."""
    short = registry.declared(backend, "EMBEDDED_SHORT_BUDGET") and is_embedded(model)
    return EMBEDDED_MAX_NEW_TOKENS if short else DEFAULT_MAX_NEW_TOKENS


def default_backend(method: str) -> str:
    """The backend of a run that names none: the one ``method``'s card declares (``backend``), else
    :data:`DEFAULT_BACKEND`."""
    METHODS.get_or_raise(method)
    return card(method).backend or DEFAULT_BACKEND


def _option_of_another(method: str, key: str) -> bool:
    """Whether ``key`` is an option of a method other than ``method`` (one that fails to load is left out)."""
    for other in METHODS:
        try:
            if other != method and key in method_options(other):
                return True
        except RearankError:  # a broken plugin: named when it is used, not here
            continue
    return False


def check_sampling(sampling: Mapping[str, Any]) -> None:
    """One-line errors for sampling settings out of range (by their keyword names)."""
    if not isinstance(sampling["max_new_tokens"], int) or sampling["max_new_tokens"] < 1:
        raise RearankError(f"max_new_tokens must be an integer of at least 1, got {sampling['max_new_tokens']!r}")
    if not sampling["temperature"] >= 0:
        raise RearankError(f"temperature must be at least 0, got {sampling['temperature']!r}")
    if not 0 < sampling["top_p"] <= 1:
        raise RearankError(f"top_p must be in (0, 1], got {sampling['top_p']!r}")


@dataclass(frozen=True)
class RunConfig:
    """What a run ranks with: ``backend`` and ``model`` (with ``backend_options``), the registered ``method`` and
    its ``options`` (by their field names; None takes the method's default), the
    ``sampling`` (greedy by default; :func:`default_max_new_tokens` gives the budget for a model) and the engine's
    ``batch_size`` and ``in_flight``. :meth:`build` makes one from keyword options, as every face does."""

    backend: str = DEFAULT_BACKEND
    model: str | None = None
    method: str = "listwise"
    options: Mapping[str, Any] = field(default_factory=dict)
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    batch_size: int = 32
    in_flight: bool | None = None

    @classmethod
    def build(cls, method: str = "listwise", backend: str | None = None, model: str | None = None, *,
              backend_options: Mapping[str, Any] | None = None, **options: Any) -> RunConfig:
        """The configuration of a run of ``method`` on ``backend`` (None: the method's, :func:`default_backend`),
        each keyword option sorted by the fields each part declares: sampling (:class:`SamplingSettings`:
        ``max_new_tokens`` None or not given takes :func:`default_max_new_tokens`; ``seed`` seeds the method too when
        it has one), the method's own (:func:`method_options`), the engine's (:data:`ENGINE_OPTIONS`; a batch size not
        given is the backend's ``BATCH_SIZE``); an option of another method is refused, and the rest go to the
        backend, beside ``backend_options``. Every setting but the backend's options is checked now
        (:meth:`check_backend` checks those)."""
        METHODS.get_or_raise(method)
        backend = backend or default_backend(method)
        registry.BACKENDS.get_or_raise(backend)
        own = method_options(method)
        sampling = {**asdict(SamplingSettings()), "max_new_tokens": None}
        engine = {**dict.fromkeys(ENGINE_OPTIONS), "batch_size": registry.declared(backend, "BATCH_SIZE")}
        given: dict[str, Any] = {}
        to_backend = dict(backend_options or {})
        for key, value in options.items():
            if key in sampling:
                sampling[key] = value
            elif key in own:
                given[key] = value
            elif key in engine:
                engine[key] = value
            elif _option_of_another(method, key):
                raise RearankError(f"{key!r} is not an option of the {method} method; it takes: {', '.join(own)}")
            else:
                to_backend[key] = value
        if sampling["max_new_tokens"] is None:
            sampling["max_new_tokens"] = default_max_new_tokens(backend, model)
        check_sampling(sampling)
        if "seed" in own:
            given["seed"] = sampling["seed"]
        return cls(backend=backend, model=model, method=method, options=given, backend_options=to_backend,
                   sampling=SamplingSettings(**sampling), **engine)

    def __post_init__(self) -> None:
        registry.BACKENDS.get_or_raise(self.backend)
        METHODS.get_or_raise(self.method)
        unknown = sorted(set(self.options) - set(method_options(self.method)))
        if unknown:
            raise RearankError(f"{', '.join(unknown)}: not an option of the {self.method} method; it takes: "
                               f"{', '.join(method_options(self.method))}")
        check_batch_size(self.batch_size)
        self.ranking_method  # noqa: B018 (a bad method option fails now, before any model loads)
        scores = registry.role(self.backend) == SCORER and self.method in (self.declared("FOR_METHODS") or ())
        if scores and getattr(self.ranking_method, "reasoning", False):
            raise RearankError(f"--reasoning on asks an LLM to reason before its yes/no; the {self.backend} backend "
                               "scores (query, passage) pairs without generating: add --backend hf, vllm or openai")

    def declared(self, capability: str) -> Any:
        """What the backend declares as ``capability`` (:func:`rearank.backends.registry.declared`)."""
        return registry.declared(self.backend, capability)

    @cached_property
    def ranking_method(self) -> Method:
        """The method, built from the options given (checked by the method)."""
        given = {key: value for key, value in self.options.items() if value is not None}
        try:
            return METHODS[self.method](**given)
        except TypeError as err:
            raise RearankError(f"bad {self.method} option ({err})") from None

    def backend_kwargs(self, qrels: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, Any]:
        """The keyword options the backend is built with: one that declares ``NEEDS_QRELS`` (the oracle) also takes
        ``qrels`` (an error without)."""
        options = dict(self.backend_options)
        if self.declared("NEEDS_QRELS"):
            if qrels is None:
                raise RearankError(f"the {self.backend} backend ranks by relevance judgments: pass --qrels "
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
        """The engine running the method on ``backend`` with these sampling settings, batch size, windows in flight
        and concurrency."""
        return Engine(backend, self.ranking_method, self.sampling, batch_size=self.batch_size, in_flight=self.in_flight,
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
