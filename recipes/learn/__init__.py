"""``make train-learn``: does a verl GRPO run on CPU move SmolLM2-135M toward better rankings? (a benchmark)

Two tasks (:mod:`recipes.learn.windows`): ``phrase``, a controlled task with a learnable signal built from real
DL21 passages, and ``relevance``, the real one (one relevant DL21 passage among four, held out on DL19). For each:
the base model and a supervised warm start answer the held-out windows greedily; the warm start is gated (format,
reward spread, first picks balanced); verl runs GRPO from it with the Rearank recipe, the CPU plugin and the
one-action reward (:mod:`recipes.learn.reward`), validating inside verl on the held-out windows; the report
(:mod:`recipes.learn.report`) pairs GRPO's last validation with its first (the warm start, inside verl) and writes
``docs/figures/train_learn.{json,png}``. See docs/training.md.
"""
