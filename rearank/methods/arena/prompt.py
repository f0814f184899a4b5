"""The ARENA generator prompt: the question and numbered references, answered in three tags.

Layout facts from the paper (Table 1) and the released code: the question and references inside ``<question>`` and
``<references>`` tags, references as ``1. text`` lines, 10 paragraphs (20 for MuSiQue), the output
``<relevance>[i, j]</relevance><analysis>…</analysis><answer>…</answer>`` with the relevance ids as a JSON list.
The wording is ours, in ``arena.yaml`` in this folder (:mod:`rearank.methods.templates`).
"""

from __future__ import annotations

from collections.abc import Sequence

from rearank.methods.templates import load_prompt_file
from rearank.prompts.builder import Tokenizer, clean_passages, numbered, titled
from rearank.prompts.qa_files import PromptFile
from rearank.types import Message, Passage

#: Paragraphs shown per question (MuSiQue ships 20 a question, the others 10).
N_REFERENCES = 10
N_REFERENCES_MUSIQUE = 20

def n_references(source: str) -> int:
    """How many paragraphs ARENA shows for a dataset: 20 for MuSiQue, else 10."""
    return N_REFERENCES_MUSIQUE if source == "musique" else N_REFERENCES


def render_references(passages: Sequence[Passage], max_passage_tokens: int | None = None,
                      tokenizer: Tokenizer | None = None) -> str:
    """``1. Title: text`` lines, 1-based (``1. text`` when a passage has no title)."""
    texts = clean_passages([titled(p.title, p.text, "{title}: {text}") for p in passages], max_passage_tokens, tokenizer)
    return "\n".join(numbered(texts, "{index}. {passage}"))


def arena_messages(question: str, passages: Sequence[Passage], *, max_passage_tokens: int | None = None,
                   tokenizer: Tokenizer | None = None, template: str | PromptFile = "arena") -> list[Message]:
    """The ARENA generator's chat over ``passages`` (callers cut them to :func:`n_references`)."""
    references = render_references(passages, max_passage_tokens, tokenizer)
    return load_prompt_file(template).messages(question=" ".join(question.split()), references=references)
