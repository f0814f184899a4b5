"""Errors a user can act on: the CLI prints their message in one line, never a traceback."""


class RearankError(Exception):
    """Base of every error whose message tells the user what is wrong and what to do."""


class FormatError(RearankError, ValueError):
    """A malformed input file; the message names the file and line."""

    def __init__(self, path: object, line: int | None, message: str) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line


class InputError(RearankError, ValueError):
    """A value handed to the Python face that is not of the kind it takes (a query that is no text, passages that
    are no list)."""


class MissingDataError(RearankError, FileNotFoundError):
    """A dataset pack, file or document that is not there; the message says how to get it."""
