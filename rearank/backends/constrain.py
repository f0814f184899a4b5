"""Constrained answers and the think budget over token ids, shared by the ``hf`` and ``vllm`` backends.

A :class:`Decoding` follows one generation token by token and says which tokens may come next:

1. with the constraint on and a reasoning grammar, the reasoning's opening tag (``<think>``) is forced first;
2. the reasoning is free (the end-of-sequence token is held back while the constraint is on), until the model
   writes the closing tag, or until ``max_think_tokens`` (with the constraint on, also the point after which the
   longest answer would no longer fit in ``max_new_tokens``): then the closing tag and the answer's opening are
   forced, and the trace says the budget was hit;
3. the answer: with the constraint, only text the method's :class:`rearank.grammar.AnswerGrammar` allows, then
   the end-of-sequence token; without it, free.

The token filter is lm-format-enforcer's (``TokenEnforcer`` over a prefix tree of the vocabulary, built once per
tokenizer): its regular-expression parser for :class:`rearank.grammar.Pattern` bodies and
:class:`DistinctIdsParser` (here) for :class:`rearank.grammar.IdList`, which no regular expression of reasonable
size expresses (a permutation of 20 ids).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rearank.errors import RearankError
from rearank.grammar import CONSTRAIN_MODES, AnswerGrammar, IdList

#: Tokens decoded to look for the reasoning's closing tag (a tag is a few tokens long; a token at least one byte).
_TAIL = 16
#: The key of a vLLM request's ``extra_args`` (a server's ``vllm_xargs``) that turns rearank's logits processor
#: (:mod:`rearank.backends.vllm_constrain`) on for it.
EXTRA_KEY = "rearank_answer"
#: How the ``openai`` backend asks a server for a constrained answer (``-O structured_output=``): vLLM's
#: ``structured_outputs`` regex (vLLM >= 0.10), its former ``guided_regex``, SGLang's ``regex``, or rearank's own
#: logits processor on a vLLM server started with ``--logits-processors`` (the only one that keeps ids distinct).
STRUCTURED_OUTPUTS = ("vllm", "vllm-guided", "sglang", "rearank")
#: What a vLLM server's ``--logits-processors`` takes to run rearank's processor.
LOGITS_PROCESSOR = "rearank.backends.vllm_constrain:AnswerLogitsProcessor"


def check_constrain(value: str | None, backend: str) -> bool:
    """Whether ``-O constrain=VALUE`` turns the constraint on; a one-line error for an unknown value."""
    if value is None or value == "off" or value is False:
        return False
    if value == "answer":
        return True
    raise RearankError(f"backend option constrain={value!r} ({backend}): choose one of {', '.join(CONSTRAIN_MODES)}")


def request_args(grammar: AnswerGrammar, *, constrain: bool, max_think_tokens: int | None, max_new_tokens: int,
                 as_text: bool = False) -> dict[str, Any]:
    """A vLLM request's ``extra_args`` that make rearank's logits processor follow ``grammar`` (``as_text``: the
    value as JSON text, which a server's ``vllm_xargs`` accepts)."""
    spec = {"grammar": grammar.to_dict(), "constrain": constrain, "max_think_tokens": max_think_tokens,
            "max_new_tokens": max_new_tokens}
    return {EXTRA_KEY: json.dumps(spec) if as_text else spec}


def structured_output(api: str, grammar: AnswerGrammar, *, constrain: bool, max_think_tokens: int | None,
                      max_new_tokens: int) -> dict[str, Any]:
    """The request fields that ask a server (``api``, one of :data:`STRUCTURED_OUTPUTS`) for ``grammar``.

    A regular expression cannot keep 20 ids distinct: through ``vllm``, ``vllm-guided`` and ``sglang`` a listwise
    answer has the right form and ``n`` in-range ids, and the parser repairs a repeated one (status
    ``repetition``); ``rearank`` keeps them distinct and also applies ``max_think_tokens``. A regular expression
    counts characters, not tokens: it bounds the reasoning to the characters that leave room for the longest
    answer in ``max_new_tokens`` (a token writes at least one character of ASCII text), so that the answer is
    not cut off.
    """
    if api == "rearank":
        return {"vllm_xargs": request_args(grammar, constrain=constrain, max_think_tokens=max_think_tokens,
                                           max_new_tokens=max_new_tokens, as_text=True)}
    budget = think_budget(grammar, constrain, None, max_new_tokens)
    regex = grammar.regex(None if budget is None else max(budget - len(grammar.think[0]), 0))  # type: ignore[index]
    return {"vllm": {"structured_outputs": {"regex": regex}}, "vllm-guided": {"guided_regex": regex},
            "sglang": {"regex": regex}}[api]


def fits(grammar: AnswerGrammar, text: str) -> bool:
    """Whether a finished output ends with an answer part ``grammar`` allows (how a backend tells that a server
    applied the constraint)."""
    return re.search("(?:" + grammar.answer_regex() + r")\s*\Z", text) is not None


def _lmfe() -> Any:
    try:
        import lmformatenforcer
    except ImportError as err:
        raise RearankError(f"constrained answers need lm-format-enforcer ({err}); install `rearank[hf]` or "
                           "`pip install lm-format-enforcer`") from err
    return lmformatenforcer


class DistinctIdsParser:
    """lm-format-enforcer character parser of ``count`` distinct ``[k]`` ids (1..n) joined by ``separator``.

    Immutable: :meth:`add_character` returns the next state. ``used``: ids written; ``digits``: the id being
    written (None between ids); ``sep``: how much of the separator is written.
    """

    def __init__(self, body: IdList, used: frozenset[int] = frozenset(), digits: str | None = None,
                 sep: int = 0, closed: bool = False) -> None:
        self.body, self.used, self.digits, self.sep, self.closed = body, used, digits, sep, closed
        self.config = None  # set by lm-format-enforcer; this parser needs none

    def _next(self, **change: Any) -> DistinctIdsParser:
        state = {"used": self.used, "digits": self.digits, "sep": self.sep, "closed": self.closed, **change}
        return DistinctIdsParser(self.body, **state)

    def _fits(self, prefix: str) -> bool:
        """Whether some unused id in 1..n starts with ``prefix`` (none starts with a zero)."""
        return any(str(k).startswith(prefix) and k not in self.used for k in range(1, self.body.n + 1))

    def get_allowed_characters(self) -> str:
        if self.closed:  # an id was just closed: the separator follows, unless all ids are written
            return "" if len(self.used) == self.body.count else self.body.separator[self.sep]
        if self.digits is None:
            return "["
        allowed = "".join(d for d in "0123456789" if self._fits(self.digits + d))
        if self.digits and int(self.digits) <= self.body.n and int(self.digits) not in self.used:
            allowed += "]"
        return allowed

    def add_character(self, char: str) -> DistinctIdsParser:
        if char not in self.get_allowed_characters():
            raise ValueError(f"{char!r} does not continue the id list")
        if self.closed:
            sep = self.sep + 1
            if sep == len(self.body.separator):
                return self._next(closed=False, sep=0)
            return self._next(sep=sep)
        if self.digits is None:
            return self._next(digits="")
        if char == "]":
            return self._next(used=self.used | {int(self.digits)}, digits=None, closed=True)
        return self._next(digits=self.digits + char)

    def can_end(self) -> bool:
        return self.closed and len(self.used) == self.body.count

    def cache_key(self) -> Any:
        return ("ids", self.body, self.used, self.digits, self.sep, self.closed)

    def shortcut_key(self) -> Any:
        return None


@dataclass
class Vocabulary:
    """What the token filter needs of a tokenizer, built once: lm-format-enforcer's tokenizer data, the
    end-of-sequence ids, and a decoder."""

    data: Any
    eos_ids: tuple[int, ...]
    tokenizer: Any

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def build_vocabulary(tokenizer: Any, eos_ids: Sequence[int], vocab_size: int | None = None) -> Vocabulary:
    """The :class:`Vocabulary` of a Hugging Face tokenizer (about a second for 50k tokens).

    Each token's text is read after a ``0`` token, so a leading space (word start) is kept; special tokens and
    tokens without text are left out (the answer never needs them, and every allowed token writes a character).
    """
    enforcer = _lmfe().tokenenforcer
    size = vocab_size or len(tokenizer)
    special = set(tokenizer.all_special_ids)
    zero = tokenizer.encode("0", add_special_tokens=False)[-1]
    ids = list(range(min(size, len(tokenizer))))
    after_zero = tokenizer.batch_decode([[zero, i] for i in ids])
    alone = tokenizer.batch_decode([[i] for i in ids])
    regular = [(i, pair[1:], len(pair) - 1 > len(single))
               for i, pair, single in zip(ids, after_zero, alone) if i not in special and pair[1:]]
    data = enforcer.TokenEnforcerTokenizerData(regular, functools.partial(_decode, tokenizer), list(eos_ids),
                                               False, size)
    return Vocabulary(data, tuple(eos_ids), tokenizer)


def model_eos_ids(tokenizer: Any, path: str) -> list[int]:
    """The end-of-sequence ids a model stops at: its tokenizer's and its generation config's (as vLLM stops)."""
    eos: list[Any] = [tokenizer.eos_token_id]
    try:
        from transformers import GenerationConfig

        found = GenerationConfig.from_pretrained(path).eos_token_id
        eos.extend(found if isinstance(found, list) else [found])
    except (OSError, ValueError):
        pass
    return sorted(set(eos) - {None})


def _decode(tokenizer: Any, ids: list[int]) -> str:
    return tokenizer.decode(ids).rstrip("\ufffd")


def answer_parser(grammar: AnswerGrammar, vocabulary: Vocabulary, forced: str = "") -> Any:
    """The character parser of the answer part: ``forced`` text (the reasoning's closing tag when the budget
    closes it), the opening (its leading whitespace may vary after a closing tag the model wrote), the body,
    the closing."""
    lmfe = _lmfe()
    chars = lmfe.characterlevelparser
    config = chars.CharacterLevelParserConfig(alphabet=vocabulary.data.tokenizer_alphabet)
    parts: list[Any] = []
    opening = grammar.opening
    if forced:
        parts.append(chars.StringParser(forced + opening))
    else:
        if opening.lstrip() != opening or grammar.think:
            parts.append(lmfe.regexparser.RegexParser(r"[ \n]{0,2}", config))
        if opening.strip():
            parts.append(chars.StringParser(opening.strip()))
    body = grammar.body
    if isinstance(body, IdList):
        parts.append(DistinctIdsParser(body))
    else:
        parts.append(lmfe.regexparser.RegexParser(body.regex(), config))
    if grammar.closing:
        parts.append(chars.StringParser(grammar.closing))
    return chars.SequenceParser(parts)


def think_budget(grammar: AnswerGrammar, constrain: bool, max_think_tokens: int | None, max_new_tokens: int,
                 opening_tokens: int = 0) -> int | None:
    """Reasoning tokens after which the backend closes the reasoning: ``max_think_tokens``, and with the constraint
    on at most what leaves room for the longest answer in ``max_new_tokens``; never fewer than the
    ``opening_tokens`` of a forced opening tag; None for no limit (or no reasoning)."""
    if grammar.think is None:
        return None
    limits = [] if max_think_tokens is None else [max_think_tokens]
    longest = grammar.max_answer_chars()
    if constrain and longest is not None:
        limits.append(max(max_new_tokens - longest - 1, 0))
    return max(min(limits), opening_tokens) if limits else None


def backend_budget(grammar: AnswerGrammar, encode: Callable[[str], list[int]], *, constrain: bool,
                   max_think_tokens: int | None, max_new_tokens: int) -> int | None:
    """:func:`think_budget` as a :class:`Decoding` applies it, the forced ``<think>`` tokens counted (``encode``:
    text to token ids); also for backends that read the outcome of a generation run elsewhere (vLLM's engine)."""
    opening = len(encode(grammar.think[0])) if constrain and grammar.think else 0
    return think_budget(grammar, constrain, max_think_tokens, max_new_tokens, opening)


class Decoding:
    """The token filter of one generation (see the module docstring).

    Call :meth:`step` with the generation's tokens so far before each new token. Not thread-safe: one per
    generation.
    """

    def __init__(self, grammar: AnswerGrammar, vocabulary: Vocabulary, *, constrain: bool,
                 max_think_tokens: int | None, max_new_tokens: int) -> None:
        self.grammar, self.vocabulary, self.constrain = grammar, vocabulary, constrain
        self.budget = backend_budget(grammar, vocabulary.encode, constrain=constrain, max_think_tokens=max_think_tokens,
                                     max_new_tokens=max_new_tokens)
        self.thinking = grammar.think is not None
        self.finished = False
        self._forced: list[int] = []  # token ids to force from token ``_forced_from`` on
        self._forced_from = 0
        self._enforcer: Any = None
        self._enforcer_from = 0
        self._close = re.compile(re.escape(grammar.think[1]), re.IGNORECASE) if grammar.think else None
        if grammar.think is None:
            self._start_answer(0, "", "")
        elif constrain:
            self._forced = vocabulary.encode(grammar.think[0])  # counted in the budget

    def _start_answer(self, position: int, forced: str, after_close: str) -> None:
        """The answer begins at token ``position``; ``after_close``: text of the closing token after the tag."""
        self.thinking = False
        if not self.constrain:
            self._forced = self.vocabulary.encode(forced + self.grammar.opening) if forced else []
            self._forced_from = position
            return
        parser = answer_parser(self.grammar, self.vocabulary, forced)
        for char in after_close:
            if char in parser.get_allowed_characters():
                parser = parser.add_character(char)
        self._enforcer = _lmfe().tokenenforcer.TokenEnforcer(self.vocabulary.data, parser)
        self._enforcer_from = position

    def step(self, generated: Sequence[int]) -> tuple[list[int] | None, tuple[int, ...]]:
        """``(allowed, banned)`` for the next token after ``generated``: the only token ids allowed (None: any
        but ``banned``)."""
        if self.finished or (generated and generated[-1] in self.vocabulary.eos_ids):
            self.finished = True
            return None, ()
        position = len(generated)
        if self.thinking:
            if position < len(self._forced):
                return [self._forced[position]], ()
            closed = self._closed(generated)
            if closed is not None:
                self._start_answer(position, "", closed)
            elif self.budget is not None and position >= self.budget:
                self._start_answer(position, self.grammar.think[1], "")  # type: ignore[index]
            else:
                return None, self.vocabulary.eos_ids if self.constrain else ()
        if self._enforcer is not None:
            tokens = self._enforcer.get_allowed_tokens(list(generated[self._enforcer_from:]))
            return list(tokens.allowed_tokens), ()
        offset = position - self._forced_from
        if offset < len(self._forced):
            return [self._forced[offset]], ()
        return None, ()

    def _closed(self, generated: Sequence[int]) -> str | None:
        """The text after the reasoning's closing tag if the model has written it, else None. Checked after every
        token, so a tag found in the last few tokens is the first one."""
        if self._close is None or len(generated) <= len(self._forced):
            return None
        tail = self.vocabulary.decode(generated[max(len(self._forced), len(generated) - _TAIL):])
        match = self._close.search(tail)
        return None if match is None else tail[match.end():]


def think_outcome(grammar: AnswerGrammar | None, budget: int | None, decode: Callable[[list[int]], str],
                  token_ids: Sequence[int]) -> tuple[int | None, bool]:
    """``(think_tokens, budget_hit)`` of a finished generation: tokens before its answer part (the reasoning and
    its tags; None without a reasoning grammar or when the reasoning never closed), and whether the backend
    closed it at ``budget`` (the closing tag is not in the first ``budget`` tokens). ``decode``: token ids to text."""
    if grammar is None or grammar.think is None:
        return None, False
    closing = re.compile(re.escape(grammar.think[1]), re.IGNORECASE)
    def has_tag(count: int) -> bool:
        return closing.search(decode(list(token_ids[:count]))) is not None
    if budget is not None and len(token_ids) > budget and not has_tag(budget):
        return budget, True
    if not has_tag(len(token_ids)):
        return None, False
    low, high = 1, len(token_ids)  # the fewest tokens whose text holds the tag (monotone: binary search)
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if has_tag(middle) else (middle + 1, high)
    return low, False
