"""Backend names -> classes: rearank's own, each a module of this package named here, and those other packages
register under the entry-point group ``rearank.backends`` (:mod:`rearank.plugins`). Backend modules (and torch,
vllm, httpx) load on use."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from rearank.backends.base import Backend
from rearank.backends.options import check_options
from rearank.errors import RearankError
from rearank.plugins import Registry


def _lazy(module: str, name: str) -> Callable[[], type]:
    """Class ``name`` of the module ``rearank.backends.<module>``, imported on first use."""
    return lambda: getattr(importlib.import_module(f"{__package__}.{module}"), name)


#: name -> backend class. Every backend takes ``model`` first, unless its class sets ``TAKES_MODEL = False``
#: (the oracle, which takes ``qrels``).
BACKENDS = Registry("rearank.backends", "backend", {
    "hf": _lazy("hf", "HFBackend"),
    "vllm": _lazy("vllm", "VLLMBackend"),
    "vllm-async": _lazy("vllm_async", "VLLMAsyncBackend"),
    "openai": _lazy("openai", "OpenAIBackend"),
    "oracle": _lazy("oracle", "OracleBackend"),
    "scorer": _lazy("scorer", "ScorerBackend"),
    "qa-oracle": _lazy("qa_oracle", "QAOracleBackend"),
})
#: Backends that answer questions (RAG readers) and do not rerank.
READERS = ("qa-oracle",)


def rerank_backends() -> list[str]:
    """The names of the backends that rerank: every registered one but the readers."""
    return [name for name in BACKENDS if name not in READERS]


def backend_class(name: str, model: str | None = None, **options: Any) -> tuple[type, tuple[Any, ...], dict[str, Any]]:
    """The class of backend ``name``, its positional arguments and its checked options, after checking ``model``
    and ``options`` against its ``OPTIONS`` (:mod:`rearank.backends.options`: types and ranges) and its signature
    (this imports the backend's module, but loads no model)."""
    cls = BACKENDS.get_or_raise(name)
    args: tuple[Any, ...] = ()
    if not getattr(cls, "TAKES_MODEL", True):
        if model is not None:
            raise RearankError(f"the {name} backend takes no model (got {model!r})")
    else:
        args = (model,)
    options = check_options(name, getattr(cls, "OPTIONS", ()), options)
    try:
        inspect.signature(cls).bind(*args, **options)
    except TypeError as err:
        accepted = [p for p in inspect.signature(cls).parameters if p != "model"]
        raise RearankError(f"bad options for the {name} backend ({err}); it accepts: {', '.join(accepted)}") from None
    return cls, args, options


def make_backend(name: str, model: str | None = None, **options: Any) -> Backend:
    """Build the backend called ``name`` (one of :data:`BACKENDS`, exact) for ``model`` with ``options``.

    ``model`` is a hub id, local folder, ``.gguf`` file or ``embedded`` for ``hf``/``vllm``, and the
    served model name for ``openai``. The oracle takes no model, and needs ``qrels=``.
    """
    cls, args, options = backend_class(name, model, **options)
    return cls(*args, **options)
