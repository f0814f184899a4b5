"""The README and the docs/ pages stay true to the code: every relative link (and its #anchor) resolves, every
Python block compiles, every ``rearank ...`` command in a shell block parses with the real command line (so a
renamed or removed flag fails here), and the README stays a short front door. ``make docs`` builds the site
with ``mkdocs build --strict`` (CI runs it)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from rearank.cli import build_parser
from tests.conftest import ROOT

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "recipes").rglob("README.md")])
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def prose(text: str) -> str:
    """The text outside fenced blocks and inline code (where brackets are not links)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (what mkdocs links to)."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+\s+(.+?)\s*$", FENCE.sub("", page.read_text()), re.MULTILINE)}


def links() -> list[tuple[str, str]]:
    return [(name(page), target) for page in PAGES for target in LINK.findall(prose(page.read_text()))
            if not re.match(r"[a-z]+:", target)]


def blocks(*languages: str) -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) in languages:
                found.append((f"{name(page)}:{text[:match.start()].count(chr(10)) + 2}", match.group(2)))
    return found


@pytest.mark.parametrize(("page", "target"), links())
def test_relative_links_resolve(page, target):
    path, _, anchor = target.partition("#")
    resolved = (ROOT / page).parent / path if path else ROOT / page
    assert resolved.exists(), f"{page}: link to {target}: no such file"
    if anchor and resolved.suffix == ".md":
        assert anchor in anchors(resolved), f"{page}: link to {target}: no such heading in {path or page}"


@pytest.mark.parametrize(("where", "code"), blocks("python"))
def test_python_blocks_compile(where, code):
    compile(code, where, "exec")


def commands() -> list[tuple[str, list[str]]]:
    """Each ``rearank ...`` command of the shell blocks (continuations joined, comments and pipes cut)."""
    found = []
    for where, code in blocks("bash", "sh", "shell", "console"):
        for line in code.replace("\\\n", " ").splitlines():
            line = line.strip().removeprefix("$ ")
            if not line.startswith("rearank "):
                continue
            words = shlex.split(re.split(r"\s[|&;]|\s>", line)[0], comments=True)
            found.append((where, words[1:]))
    return found


@pytest.mark.parametrize(("where", "argv"), commands())
def test_documented_commands_parse(where, argv):
    parser = build_parser()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.suppress(SystemExit):
        parser.parse_args(argv)
        return
    pytest.fail(f"{where}: rearank {' '.join(argv)}: {err.getvalue().strip().splitlines()[-1]}")


def test_readme_is_a_short_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150
    assert "make test" in text and "make demo" in text
    for page in ("docs/architecture.md", "docs/reranking.md", "docs/serving.md", "docs/training.md", "docs/rag.md"):
        assert f"]({page})" in text, f"the README does not link {page}"
