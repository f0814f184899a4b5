"""Command-line flags shared by ``rearank rerank`` and ``rearank benchmark``, and what they build.

One spelling per idea: ``--output FILE`` for a file, ``--output-dir DIR`` for a folder; a flag once spelled
otherwise keeps its old spelling as a hidden alias (:func:`add_renamed`). One declaration per flag: the model and
sampling flags (:func:`add_model_arguments`), the method flags
(:func:`add_method_arguments`), and the method, backend options and generation budget they give
(:func:`method_from_args`, :func:`backend_options`, :func:`max_new_tokens_for`, :func:`apply_preset`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

from rearank import job
from rearank.backends.options import parse_pairs
from rearank.engine import check_batch_size
from rearank.errors import RearankError
from rearank.grouprank.presets import preset
from rearank.job import DEFAULT_MAX_NEW_TOKENS, EMBEDDED_MAX_NEW_TOKENS
from rearank.methods import Groupwise, Listwise, Method

#: Settings a ``--preset`` may fill, and their parser defaults (a flag still at its default takes the preset's).
_PRESET_KEYS = ("prompt", "temperature", "top_p", "max_new_tokens", "group_size", "fusion_weight", "fusion",
                "shuffle_all")
_DEFAULTS: dict[str, Any] = {}
#: Backends that rerank (``qa-oracle`` is a RAG reader).
RERANK_BACKENDS = ("hf", "vllm", "vllm-async", "openai", "oracle")


def add_renamed(container: Any, names: Sequence[str], old: Sequence[str], **kwargs: Any) -> argparse.Action:
    """Add the option ``names`` (shown in help) and the hidden aliases ``old`` writing the same ``dest``.

    ``container`` is a parser or an argument group. ``required=True`` holds for the option under any spelling
    (a required mutually exclusive group of the two, whose error names only the shown spelling).
    """
    required = kwargs.pop("required", False)
    target = container.add_mutually_exclusive_group(required=True) if required else container
    action = target.add_argument(*names, **kwargs)
    alias = {k: v for k, v in kwargs.items() if k in ("type", "metavar", "choices", "action", "nargs")}
    target.add_argument(*old, dest=action.dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **alias)
    return action


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``--backend --model -O --max-new-tokens --temperature --top-p --seed``."""
    model = parser.add_argument_group("model")
    model.add_argument("--backend", choices=RERANK_BACKENDS, default="hf", help="generation backend")
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


def add_method_arguments(parser: argparse.ArgumentParser, modes: tuple[str, ...] = ("listwise", "groupwise")) -> None:
    """``--mode`` and the listwise and groupwise settings (``--preset`` included)."""
    rank = parser.add_argument_group("reranking")
    rank.add_argument("--mode", choices=modes, default="listwise",
                      help="listwise sliding windows, groupwise scoring (GroupRank)" + (
                          ", or a pointwise scorer (--model: a saved RRPO scorer, a cross-encoder or a causal LM; "
                          "-O kind=, device=, num_layers=)" if "pointwise" in modes else ""))
    rank.add_argument("--prompt", help="builtin template (rearank, rankgpt) or a YAML template file "
                      "(default: rearank; grouprank for --mode groupwise)")
    rank.add_argument("--window", type=int, default=20, help="passages per window")
    rank.add_argument("--step", type=int, default=10, help="window stride")
    rank.add_argument("--passes", type=int, default=1, help="sliding passes over the list")
    rank.add_argument("--top-k", type=int, default=100, help="rerank the first K candidates; the rest follow them")
    rank.add_argument("--batch-size", type=int, default=32,
                      help="windows (from as many queries) per backend call on hf, vllm and the oracle; openai and "
                      "vllm-async get windows in flight instead (-O concurrency=auto|N)")
    add_passage_budget_argument(rank, "default: the budget the template declares (rearank 400 characters, rankgpt 300)")
    group = parser.add_argument_group("groupwise (--mode groupwise)")
    group.add_argument("--group-size", type=int, default=20, help="documents per group")
    group.add_argument("--group-step", type=int, help="slide groups by this step (default: partition the top-k)")
    group.add_argument("--shuffles", type=int, default=1, help="orderings of the top-k to average over")
    group.add_argument("--fusion-weight", type=float, help="weight of the rerank score fused with the retriever's")
    group.add_argument("--fallback", choices=("retriever", "zero"), default="retriever",
                       help="scores of a group whose answer has no valid score")
    group.add_argument("--preset", choices=("grouprank-released",),
                       help="grouprank-released: GroupRank's released inference (one user message of [i]. text, "
                       "3,000 characters, temperature 0.3, top-p 0.8, 8,000 new tokens, reshuffled repeats, "
                       "0.6 x score/10 + 0.4 x raw retriever score); flags left at their defaults take its values")
    parser.set_defaults(fusion="minmax", shuffle_all=False)
    _DEFAULTS.update({key: parser.get_default(key) for key in _PRESET_KEYS})


def add_passage_budget_argument(group: Any, default_help: str) -> None:
    """``--passage-budget`` (and its former spelling ``--max-passage-tokens``, hidden); ``default_help`` says what
    is cut when it is not given."""
    group.add_argument("--passage-budget", metavar="BUDGET",
                       help=f"cut each passage to N characters, words or tokens (e.g. 400c, 300w, 300t, none); "
                       f"{default_help}")
    group.add_argument("--max-passage-tokens", dest="passage_budget", type=int, help=argparse.SUPPRESS)


def add_engine_argument(parser: argparse.ArgumentParser) -> None:
    """``--engine local|ray``."""
    rank = parser.add_argument_group("engine")
    rank.add_argument("--engine", choices=("local", "ray"), default="local",
                      help="local: this process; ray: each round of windows (all queries) as a Ray Dataset on "
                      "the cluster at RAY_ADDRESS (vllm: Ray Data LLM engine replicas; -O concurrency=N, "
                      "-O batch_size=N, other -O go to the engine), resumable by round")



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


def method_from_args(args: argparse.Namespace) -> Method:
    """The listwise or groupwise method of ``rearank rerank``'s flags (checked now: before any model loads)."""
    if args.mode == "listwise":
        return Listwise(template=args.prompt or "rearank", window=args.window, step=args.step, passes=args.passes,
                        top_k=args.top_k, passage_budget=args.passage_budget)
    template = {"template": args.prompt} if args.prompt else {}
    return Groupwise(group_size=args.group_size, group_step=args.group_step, shuffles=args.shuffles, seed=args.seed,
                     fusion_weight=args.fusion_weight, fallback=args.fallback, top_k=args.top_k,
                     passage_budget=args.passage_budget, fusion=args.fusion, shuffle_all=args.shuffle_all, **template)


def backend_options(pairs: list[str]) -> dict[str, Any]:
    """Parse repeated ``-O KEY=VALUE`` flags into backend keyword options (shared with ``rearank benchmark``).

    Values are checked against the chosen backend's declared options when it is built (:func:`make_backend`).
    """
    return parse_pairs(pairs)


def max_new_tokens_for(args: argparse.Namespace) -> int:
    """``--max-new-tokens``, else the default for the chosen model (smaller for the embedded one)."""
    if args.max_new_tokens is not None:
        return args.max_new_tokens
    return job.default_max_new_tokens(args.backend, args.model)


def apply_preset(args: argparse.Namespace) -> None:
    """Fill the settings of ``--preset`` that were left at their defaults (groupwise only)."""
    if not getattr(args, "preset", None):
        return
    if args.mode != "groupwise":
        raise RearankError(f"--preset {args.preset} is a groupwise preset: add --mode groupwise")
    for key, value in preset(args.preset).items():
        if getattr(args, key) == _DEFAULTS.get(key):
            setattr(args, key, value)


