"""Moved to :mod:`rearank.backends.chat_server`; this path stays an alias of it, and ``python -m rearank.serve``
still starts the server."""

import sys

from rearank.backends import chat_server

if __name__ == "__main__":
    raise SystemExit(chat_server.main())
sys.modules[__name__] = chat_server
