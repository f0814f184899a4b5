"""Command-line flags shared by ``rearank rerank`` and ``rearank benchmark``, and what they build.

One spelling per idea: ``--output FILE`` for a file, ``--output-dir DIR`` for a folder. One declaration per flag:
the model and sampling flags (:func:`add_model_arguments`), the method flags
(:func:`add_method_arguments`), and the method, backend options and generation budget they give
(:func:`run_config`: the typed :class:`~rearank.run.config.RunConfig` the command hands on, after
:func:`apply_defaults`; :func:`backend_options`).
"""

from __future__ import annotations

import argparse
import math
import warnings
from typing import Any

from rearank.backends.options import parse_pairs
from rearank.backends.registry import rerank_backends
from rearank.engine import check_batch_size
from rearank.errors import RearankError
from rearank.io.files import id_problem
from rearank.io.outputs import reads
from rearank.methods import METHODS, method_options, option_default
from rearank.methods.card import RANK, card, cards
from rearank.methods.templates import RANKING, names
from rearank.prompts import as_reasoning
from rearank.run.config import DEFAULT_MAX_NEW_TOKENS, EMBEDDED_MAX_NEW_TOKENS, RunConfig, default_backend

#: The parser defaults of the settings a ``--preset`` may fill (a flag still at its default takes the preset's).
_DEFAULTS: dict[str, Any] = {}
#: Each method's own flags (those of options no other method shares): dest -> (method, parser default).
_OWN_FLAGS: dict[str, tuple[str, Any]] = {}


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--backend --model -O --max-new-tokens --temperature --top-p --seed``."""
    model = parser.add_argument_group("model")
    model.add_argument("--backend", choices=rerank_backends(),
                       help="generation backend (default: hf; scorer with --method pointwise), or one an installed "
                       "package registers (entry points rearank.backends)")
    model.add_argument("--model", help="model: hub id, local folder, .gguf file or 'embedded' "
                       "(default: the embedded SmolLM2-135M-Instruct for hf)")
    model.add_argument("--backend-option", "-O", action="append", default=[], metavar="KEY=VALUE",
                       help="extra backend option, repeatable (e.g. -O device=cuda, -O base_url=http://host:8000/v1)")
    model.add_argument("--max-new-tokens", type=int,
                       help=f"generation budget per window (default {DEFAULT_MAX_NEW_TOKENS}; "
                       f"{EMBEDDED_MAX_NEW_TOKENS} with the embedded model)")
    model.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    model.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (with --temperature > 0)")
    model.add_argument("--seed", type=int, default=0, help="sampling seed (and groupwise shuffle seed)")


#: Options every LLM method may have, declared once here (``seed`` is a model flag).
_SHARED_OPTIONS = ("template", "top_k", "passage_budget", "seed", "reasoning")


def add_method_arguments(parser: argparse.ArgumentParser) -> None:
    """``--method`` (a method of :data:`rearank.methods.METHODS`), the options methods share (``--template``,
    ``--top-k``, ``--passage-budget``, ``--reasoning``), each method's own flags (its ``FLAGS``; an option
    it does not describe gets ``--name`` typed from its default) and ``--preset``."""
    rank = parser.add_argument_group("reranking")
    method = rank.add_argument("--method", default="listwise",
                               help="listwise sliding windows, groupwise scoring (GroupRank), pointwise scores (with "
                               "--backend scorer, the default for it: --model a saved RRPO scorer, a cross-encoder or "
                               "a causal LM; -O kind=, device=, num_layers=), or a method an installed package "
                               "registers (entry points rearank.cards)")
    reads(rank.add_argument("--template", metavar="NAME|FILE",
                            help=f"ranking template ({', '.join(names(RANKING))}) or a YAML template file "
                            "(default: rearank; grouprank for --method groupwise)"))
    rank.add_argument("--top-k", type=int, default=100, help="rerank the first K candidates; the rest follow them")
    rank.add_argument("--batch-size", type=int, default=32,
                      help="windows (from as many queries) per backend call on hf, vllm and the oracle; openai and "
                      "vllm-async get windows in flight instead (-O concurrency=auto|N)")
    add_passage_budget_argument(rank, "default: the budget the template declares (rearank 400 characters, rankgpt 300)")
    add_reasoning_argument(rank)
    declared = {*_SHARED_OPTIONS, *(action.dest for action in parser._actions)}
    available = []
    for name in METHODS:
        try:
            _add_own_flags(parser, name, declared)
        except RearankError as err:  # a broken plugin is left out (and named), the others still work
            warnings.warn(f"{err}; --method {name} is not available", stacklevel=2)
            continue
        available.append(name)
    method.choices = available
    presets = {name: settings for c in cards(RANK) for name, settings in c.presets.items()}
    rank.add_argument(
        "--preset", choices=list(presets),
        help="groupwise only; grouprank-released: GroupRank's released inference (one user message of [i]. text, "
        "3,000 characters, temperature 0.3, top-p 0.8, 8,000 new tokens, reshuffled repeats, "
        "0.6 x score/10 + 0.4 x raw retriever score); flags left at their defaults take its values")
    _DEFAULTS.update({key: parser.get_default(key) for settings in presets.values() for key in settings})


def _add_own_flags(parser: argparse.ArgumentParser, method: str, declared: set[str]) -> None:
    """The flags of ``method``'s options not declared yet (an option another method shares keeps one flag)."""
    cls = METHODS[method]
    described = getattr(cls, "FLAGS", {})
    group = None
    for option in method_options(method):
        if option in declared:
            continue
        declared.add(option)
        default = option_default(method, option)
        if option in described and described[option] is None:
            parser.set_defaults(**{option: default})
            continue
        kwargs = dict(described.get(option) or {})
        kwargs.setdefault("default", default)
        _OWN_FLAGS[option] = (method, kwargs["default"])
        if isinstance(kwargs["default"], bool):
            kwargs.setdefault("action", "store_false" if kwargs["default"] else "store_true")
        elif "choices" not in kwargs and kwargs["default"] is not None:
            kwargs.setdefault("type", type(kwargs["default"]))
        kwargs.setdefault("help", f"{method} option {option}")
        group = group or parser.add_argument_group(f"{method} (--method {method})")
        group.add_argument("--" + option.replace("_", "-"), dest=option, **kwargs)


def reasoning_switch(value: str) -> bool:
    """``--reasoning`` on/off as a bool (argparse type)."""
    try:
        return bool(as_reasoning(value))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_reasoning_argument(group: Any) -> None:
    """``--reasoning on|off``: the one reasoning switch of every method (and of ``rearank synth``)."""
    group.add_argument("--reasoning", type=reasoning_switch, metavar="on|off",
                       help="on: the model reasons (<think>) before its answer; off: it answers at once. Listwise and "
                       "groupwise pick the template's variant (rearank <-> rearank-answer, grouprank <-> "
                       "grouprank-answer); pointwise asks for reasoning before its yes/no. Default: what the "
                       "template asks (on for rearank and grouprank, off for rankgpt and pointwise)")


def add_passage_budget_argument(group: Any, default_help: str) -> None:
    """``--passage-budget``; ``default_help`` says what is cut when it is not given."""
    group.add_argument("--passage-budget", metavar="BUDGET",
                       help=f"cut each passage to N characters, words or tokens (e.g. 400c, 300w, 300t, none); "
                       f"{default_help}")


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    """``--engine local|ray``."""
    rank = parser.add_argument_group("engine")
    rank.add_argument("--engine", choices=("local", "ray"), default="local",
                      help="local: this process; ray: each round of windows (all queries) as a Ray Dataset on "
                      "the cluster at RAY_ADDRESS (vllm: Ray Data LLM engine replicas; -O actors=N, "
                      "-O batch_size=N, other -O go to the engine), resumable by round")



def run_tag(value: str) -> str:
    """``--tag``: the last column of a TREC run, so no whitespace and not empty (argparse type)."""
    problem = id_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(f"run tag {value!r} {problem}; a tag is one word (e.g. rearank-7b)")
    return value


def fail_share(value: str) -> float:
    """``--fail-share``: a share in [0, 1] (argparse type)."""
    try:
        share = float(value)
    except ValueError:
        share = math.nan
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1] (1: only when every model call failed; "
                                         f"0: any failure), got {value!r}")
    return share


def add_run_outcome_arguments(group: Any) -> None:
    """``--fail-share``: when failed model calls make the command exit with an error (``rerank``, ``benchmark``,
    ``rag eval``)."""
    group.add_argument("--fail-share", type=fail_share, default=1.0, metavar="SHARE",
                       help="exit with an error naming the first failure when at least this share of the model calls "
                       "failed (and one did): 1 (default) only when every call failed, 0 on any failure; failed "
                       "calls are counted in the summary and the stats either way, and --resume retries them")


def check_sampling_args(args: argparse.Namespace) -> None:
    """One-line errors for sampling flags out of range."""
    for name in ("max_queries", "max_new_tokens"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise RearankError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if not (args.temperature >= 0 and math.isfinite(args.temperature)):
        raise RearankError(f"--temperature must be a finite number >= 0 (0 = greedy), got {args.temperature}")
    if not 0 < args.top_p <= 1:
        raise RearankError(f"--top-p must be in (0, 1], got {args.top_p}")
    check_batch_size(args.batch_size, "--batch-size")


def run_config(args: argparse.Namespace) -> RunConfig:
    """The typed configuration of the model, method and sampling flags (checked now: before any data or model
    loads; :meth:`RunConfig.build`); an option left unset (None) takes the method's default."""
    check_sampling_args(args)
    apply_defaults(args)
    check_method_flags(args)
    given = (*method_options(args.method), "max_new_tokens", "temperature", "top_p", "seed", "batch_size")
    return RunConfig.build(args.method, args.backend, args.model, backend_options=backend_options(args.backend_option),
                           **{key: getattr(args, key) for key in given})


def check_method_flags(args: argparse.Namespace) -> None:
    """Refuse a flag of another method than ``--method`` set away from its default (``--group-size`` with
    listwise): it would be ignored without a word."""
    own = set(method_options(args.method))
    for dest, (method, default) in _OWN_FLAGS.items():
        if dest not in own and getattr(args, dest, default) != default:
            raise RearankError(f"--{dest.replace('_', '-')} is an option of --method {method}, which this run does "
                               f"not use (--method {args.method}): drop it, or add --method {method}")


def backend_options(pairs: list[str]) -> dict[str, Any]:
    """Parse repeated ``-O KEY=VALUE`` flags into backend keyword options (shared with ``rearank benchmark``).

    Values are checked against the chosen backend's declared options when it is built (:func:`make_backend`).
    """
    return parse_pairs(pairs)


def apply_defaults(args: argparse.Namespace) -> None:
    """Fill the defaults that hang on other flags: ``--backend`` (the method card's ``backend``, else ``hf``) and
    the settings of ``--preset`` (one of the method card's ``presets``) left at their defaults."""
    if args.backend is None:
        args.backend = default_backend(args.method)
    if not getattr(args, "preset", None):
        return
    method = card(args.method)
    if args.preset not in method.presets:
        owner = next(c.name for c in cards(RANK) if args.preset in c.presets)
        raise RearankError(f"--preset {args.preset} is a {owner} preset: add --method {owner}")
    for key, value in method.presets[args.preset].items():
        if getattr(args, key) == _DEFAULTS.get(key):
            setattr(args, key, value)
