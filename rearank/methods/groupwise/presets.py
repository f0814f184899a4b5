"""Named groupwise settings (the card's ``presets``): ``--preset grouprank-released`` reproduces GroupRank's released
inference script.

Values (facts from the released script): one user message listing every document as ``[i]. text``, documents
cut to 3,000 characters, temperature 0.3, top-p 0.8, up to 8,000 new tokens, groups of 20, the candidates
reshuffled for every repeat (the first too), and final score ``0.6 * score / 10 + 0.4 * retriever score``
without normalisation.
"""

from __future__ import annotations

from typing import Any

#: Preset name -> rerank CLI settings (attribute names of ``rearank rerank``'s parsed arguments).
PRESETS: dict[str, dict[str, Any]] = {
    "grouprank-released": {
        "template": "grouprank-released",
        "temperature": 0.3,
        "top_p": 0.8,
        "max_new_tokens": 8000,
        "group_size": 20,
        "fusion_weight": 0.6,
        "fusion": "raw",
        "shuffle_all": True,
    },
}
