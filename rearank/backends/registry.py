"""Backend names -> classes: rearank's own, each a module of this package named here, and those other packages
register under the entry-point group ``rearank.backends`` (:mod:`rearank.plugins`). Backend modules (and torch,
vllm, httpx) load on use."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from rearank.backends.base import GENERATOR, READER, ROLES, Backend, BackendBase
from rearank.backends.options import check_options
from rearank.errors import RearankError
from rearank.plugins import Registry


def _lazy(module: str, name: str) -> Callable[[], type]:
    """Class ``name`` of the module ``rearank.backends.<module>``, imported on first use."""
    return lambda: getattr(importlib.import_module(f"{__package__}.{module}"), name)


#: name -> backend class. What callers need to know of a backend its class declares (:class:`BackendBase`'s
#: capabilities: ``ROLE``, ``TAKES_MODEL``, ``NEEDS_QRELS``, ``LOCAL_MODEL``, ...; :func:`declared` reads them), so no
#: backend name is compared outside this package.
BACKENDS = Registry("rearank.backends", "backend", {
    "hf": _lazy("hf", "HFBackend"),
    "vllm": _lazy("vllm", "VLLMBackend"),
    "vllm-async": _lazy("vllm_async", "VLLMAsyncBackend"),
    "openai": _lazy("openai", "OpenAIBackend"),
    "oracle": _lazy("oracle", "OracleBackend"),
    "scorer": _lazy("scorer", "ScorerBackend"),
    "qa-oracle": _lazy("qa_oracle", "QAOracleBackend"),
})


def declared(name: str, capability: str) -> Any:
    """What backend ``name`` declares as ``capability`` (a class attribute of :class:`BackendBase`, e.g.
    ``NEEDS_QRELS``): its class's, else :class:`BackendBase`'s default (a plugin's class need not subclass it)."""
    return getattr(BACKENDS.get_or_raise(name), capability, getattr(BackendBase, capability))


def role(name: str) -> str:
    """The ``ROLE`` backend ``name`` declares; a plugin whose class fails to load counts as a generator, so it is
    listed, and using it names the failure."""
    if name not in BACKENDS:
        BACKENDS.get_or_raise(name)  # the one-line error naming the backends there are
    try:
        return declared(name, "ROLE")
    except RearankError:
        return GENERATOR


def backends(*roles: str) -> list[str]:
    """The registered backends (entry points included) whose role is one of ``roles``."""
    return [name for name in BACKENDS if role(name) in roles]


def rerank_backends() -> list[str]:
    """The names of the backends that rerank: every registered one but the readers."""
    return backends(*(r for r in ROLES if r != READER))


def backend_class(name: str, model: str | None = None, **options: Any) -> tuple[type, tuple[Any, ...], dict[str, Any]]:
    """The class of backend ``name``, its positional arguments and its checked options, after checking ``model``
    and ``options`` against its ``OPTIONS`` (:mod:`rearank.backends.options`: types and ranges) and its signature
    (this imports the backend's module, but loads no model)."""
    cls = BACKENDS.get_or_raise(name)
    args: tuple[Any, ...] = ()
    if not declared(name, "TAKES_MODEL"):
        if model is not None:
            raise RearankError(f"the {name} backend takes no model (got {model!r})")
    else:
        args = (model,)
    options = check_options(name, declared(name, "OPTIONS"), options)
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
