"""Re-render stored training prompts with a template and report the first difference (``rearank prompt check``).

A row (verl RL parquet row, or a chat JSONL line) carries its chat messages (``prompt`` or ``messages``) and
what it was rendered from: the query (``query``, or ``qid`` looked up in a dataset's topics) and the passages
(``passages`` as texts or ``{"title", "text"}`` objects, or ``docids`` looked up in a dataset's documents),
either at the top level or inside ``extra_info``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rearank.errors import FormatError, RearankError
from rearank.prompts.builder import BudgetLike, Tokenizer, build_messages
from rearank.prompts.templates import PromptTemplate, read_template
from rearank.types import Candidate

#: Characters shown on each side of a difference.
SNIPPET = 40


@dataclass(frozen=True)
class Row:
    """One stored prompt and what it was rendered from (``where``: file and row/line, for messages)."""

    where: str
    messages: list[dict[str, str]]
    query: str | None
    qid: str | None
    passages: list[Candidate] | None
    docids: list[str] | None


@dataclass(frozen=True)
class Difference:
    """The first place where a re-rendered prompt differs from the stored one."""

    where: str
    message: int
    offset: int
    stored: str
    rendered: str

    def __str__(self) -> str:
        return (f"{self.where}: message {self.message}, character {self.offset}:\n"
                f"  stored:   {self.stored!r}\n  rendered: {self.rendered!r}")


def read_rows(path: str | Path) -> Iterator[Row]:
    """Rows of a verl parquet (``.parquet``) or chat JSONL file."""
    path = Path(path)
    if not path.is_file():
        raise RearankError(f"{path}: no such file")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as err:  # noqa: BLE001 -- pyarrow raises several types for a broken file
            raise FormatError(path, None, f"cannot read parquet ({err})") from None
        for index, record in enumerate(table.to_pylist()):
            yield _row(record, f"{path} row {index}")
        return
    from rearank.io.files import iter_json_lines

    for line, record in iter_json_lines(path):
        yield _row(record, f"{path}:{line}")


def _row(record: Mapping[str, Any], where: str) -> Row:
    extra = record.get("extra_info") or {}

    def get(key: str) -> Any:
        return record.get(key) if record.get(key) is not None else extra.get(key)

    messages = get("prompt") or get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "content" in m for m in messages):
        raise RearankError(f"{where}: no chat messages ('prompt' or 'messages': a list of role/content objects)")
    passages = get("passages")
    if passages is not None:
        passages = [_candidate(p, where) for p in passages]
    docids = get("docids")
    qid = get("qid")
    return Row(where, [{"role": m.get("role"), "content": m["content"]} for m in messages], get("query"),
               None if qid is None else str(qid), passages, None if docids is None else [str(d) for d in docids])


def _candidate(value: Any, where: str) -> Candidate:
    if isinstance(value, str):
        return Candidate("", 0.0, text=value)
    if isinstance(value, Mapping) and isinstance(value.get("text", value.get("content")), str):
        return Candidate("", 0.0, text=value.get("text", value.get("content")), title=value.get("title") or "")
    raise RearankError(f"{where}: a passage must be a text or a {{title, text}} object, got {type(value).__name__}")


class Lookup:
    """Query texts and documents of dataset packs, loaded for the ids the rows need."""

    def __init__(self, datasets: Sequence[str]) -> None:
        self.datasets = list(datasets)
        self.topics: dict[str, str] = {}
        self.docs: dict[str, Candidate] = {}

    def load(self, rows: Sequence[Row]) -> None:
        from rearank.data.packs import load_docs, load_topics, resolve

        want = {d for r in rows if r.passages is None for d in r.docids or ()}
        for name in self.datasets:
            pack = resolve(name)
            self.topics.update(load_topics(pack.topics))
            found = load_docs(pack.docs, want - set(self.docs))
            self.docs.update({d: Candidate(d, 0.0, text=text, title=title) for d, (title, text) in found.items()})

    def inputs(self, row: Row) -> tuple[str, list[Candidate]]:
        query = row.query if row.query is not None else self.topics.get(row.qid or "")
        if query is None:
            raise RearankError(f"{row.where}: no query text ('query', or a 'qid' of --dataset's topics)")
        if row.passages is not None:
            return query, row.passages
        if row.docids is None:
            raise RearankError(f"{row.where}: no passages ('passages', or 'docids' of --dataset's documents)")
        missing = [d for d in row.docids if d not in self.docs]
        if missing:
            raise RearankError(f"{row.where}: document {missing[0]} is not in --dataset {','.join(self.datasets)}")
        return query, [self.docs[d] for d in row.docids]


def first_difference(where: str, stored: Sequence[Mapping[str, str]], rendered: Sequence[Mapping[str, str]]
                     ) -> Difference | None:
    """The first differing message (role or text) and character, or None when identical."""
    for index in range(max(len(stored), len(rendered))):
        a = stored[index] if index < len(stored) else {"role": "(none)", "content": ""}
        b = rendered[index] if index < len(rendered) else {"role": "(none)", "content": ""}
        if a.get("role") != b.get("role"):
            return Difference(where, index, 0, f"<{a.get('role')}> {a['content'][:SNIPPET]}",
                              f"<{b.get('role')}> {b['content'][:SNIPPET]}")
        x, y = a["content"], b["content"]
        if x != y:
            offset = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            low = max(0, offset - SNIPPET)
            return Difference(where, index, offset, x[low:offset + SNIPPET], y[low:offset + SNIPPET])
    return None


def check_rows(
    rows: Iterable[Row], template: str | Path | PromptTemplate, lookup: Lookup | None = None,
    budget: BudgetLike = None, tokenizer: Tokenizer | None = None,
) -> tuple[int, Difference | None]:
    """Re-render every row; return how many rows were identical before the first difference, and that difference."""
    tpl = read_template(template)
    rows = list(rows)
    lookup = lookup or Lookup([])
    if lookup.datasets:
        lookup.load(rows)
    for count, row in enumerate(rows):
        query, passages = lookup.inputs(row)
        rendered = build_messages(query, passages, tpl, budget=budget, tokenizer=tokenizer)
        diff = first_difference(row.where, row.messages, rendered)
        if diff is not None:
            return count, diff
    return len(rows), None
