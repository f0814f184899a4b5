"""Walking the command-line parsers: every leaf command, its shown flags, and a command line filling the required
ones (for tests that check a property of every flag of every command)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from pathlib import Path


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(command path, parser) of every leaf command under ``parser``."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from commands(sub, (*path, name))


def shown(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The actions of ``parser`` a user sees (--help and any option hidden from it left out)."""
    return [a for a in parser._actions if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]


def filler(action: argparse.Action, tmp: Path) -> str:
    """A value ``action`` parses: its first choice, 1 for a number, else a path under ``tmp`` that does not exist."""
    if action.choices:
        return str(next(iter(action.choices)))
    if action.type in (int, float):
        return "1"
    return str(tmp / f"absent-{action.dest}")


def command_line(path: tuple[str, ...], parser: argparse.ArgumentParser, values: Mapping[argparse.Action, str],
                 tmp: Path) -> list[str]:
    """The command line of ``path`` giving ``values`` and every other required flag (a required group by its first
    shown member, unless one of ``values`` is in it); positionals first, then options."""
    values = dict(values)
    for group in parser._mutually_exclusive_groups:
        members = [a for a in group._group_actions if a.help != argparse.SUPPRESS]
        if group.required and not any(a in values for a in group._group_actions):
            values[members[0]] = filler(members[0], tmp)
    for action in shown(parser):
        if action.required and action not in values:
            values[action] = filler(action, tmp)
    argv = [*path, *(value for action, value in values.items() if not action.option_strings)]
    for action, value in values.items():
        if action.option_strings:
            argv += [action.option_strings[0], value]
    return argv
