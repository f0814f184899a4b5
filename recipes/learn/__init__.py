"""``make train-learn``: does a verl GRPO run on CPU make SmolLM2-135M rank held-out passages better? (a benchmark)

Two tasks (:mod:`recipes.learn.windows`): ``relevance``, the real one (one relevant passage among four; warm start
and GRPO on DL21, 512 held-out DL19 windows), and ``phrase``, a controlled task with a learnable signal built from
real passages. ``--set-size 2`` runs either on two passages a window (issue #45's fallback), labelled
"<task>, 2 passages" wherever it is reported. The plan (steps, evaluation steps, every setting) is written into the figures JSON before anything
trains. The base model and a warm start (:mod:`recipes.learn.run`; for relevance SFT on lexical labels,
:mod:`recipes.learn.lexical`, stopped at partial skill) are gated (format, reward spread, no position habit); verl
runs GRPO from it with the Rearank recipe, the CPU plugin, KL and the one-id reward (:mod:`recipes.learn.reward`),
saving a model at every planned evaluation step; each is evaluated deterministically (:mod:`recipes.learn.evaluate`,
the argmax of the id's logits); the report (:mod:`recipes.learn.report`) tests GRPO's end against the warm start
per item (McNemar) and per query (query-flip randomization), beside constant and lexical baselines, and writes
``docs/figures/train_learn.{json,png}`` and the per-item outcomes. See docs/training.md.
"""
