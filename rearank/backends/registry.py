"""Backend names -> constructors. An explicit table; backend modules (and torch, vllm, httpx) load on use."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from rearank.backends.base import Backend
from rearank.backends.options import check_options
from rearank.errors import RearankError

#: name -> (module, class). Every backend takes ``model`` first, except the oracle, which takes ``qrels``.
BACKENDS: dict[str, tuple[str, str]] = {
    "hf": ("rearank.backends.hf", "HFBackend"),
    "vllm": ("rearank.backends.vllm", "VLLMBackend"),
    "vllm-async": ("rearank.backends.vllm_async", "VLLMAsyncBackend"),
    "openai": ("rearank.backends.openai", "OpenAIBackend"),
    "oracle": ("rearank.backends.oracle", "OracleBackend"),
    "qa-oracle": ("rearank.backends.qa_oracle", "QAOracleBackend"),
}
_NO_MODEL = {"oracle"}


def backend_class(name: str, model: str | None = None, **options: Any) -> tuple[type, tuple[Any, ...], dict[str, Any]]:
    """The class of backend ``name``, its positional arguments and its checked options, after checking ``model``
    and ``options`` against its ``OPTIONS`` (:mod:`rearank.backends.options`: types and ranges) and its signature
    (this imports the backend's module, but loads no model)."""
    if name not in BACKENDS:
        raise RearankError(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    module_name, class_name = BACKENDS[name]
    cls = getattr(importlib.import_module(module_name), class_name)
    args: tuple[Any, ...] = ()
    if name in _NO_MODEL:
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
