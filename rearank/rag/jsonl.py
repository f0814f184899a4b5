"""Re-exported from :mod:`rearank.io.jsonl_log`, the one reader and appender of resumable JSON Lines logs."""

from rearank.io.jsonl_log import JsonlAppender, read_jsonl_log

__all__ = ["JsonlAppender", "read_jsonl_log"]
