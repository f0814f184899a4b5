"""Rearank training data: multi-sampling initial-state expansion of judged queries into verl RL rows.

``synthesize(requests, qrels, output_dir, SynthConfig(...))`` writes ``train.parquet``/``val.parquet`` (and the
direct-SFT JSONL variant) with a stats report; ``rearank synth`` is its command line. See ``docs/synthesis.md``.
"""

from data_synthesis.filters import FilterConfig
from data_synthesis.pipeline import SynthConfig, synthesize

__all__ = ["FilterConfig", "SynthConfig", "synthesize"]
