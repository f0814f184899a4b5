"""The rerank server (``rearank serve``): Jina/vLLM ``/v1/rerank``, Cohere ``/v2/rerank`` and chat completions.

Needs the ``serve`` extra (FastAPI, uvicorn). See docs/serving.md.
"""

from rearank.server.app import Limits, RerankService, create_app, serve_in_thread
from rearank.server.feed import Feed, Overloaded
from rearank.server.judge import TextJudge

__all__ = ["Feed", "Limits", "Overloaded", "RerankService", "TextJudge", "create_app", "serve_in_thread"]
