"""The checks of the verl recipes, and the commands around a launch, over one table of stages.

- :mod:`~recipes.checks.table`: the stages (recipe file, data, CPU lengths, smoke settings) and ``--recipe`` names
- :mod:`~recipes.checks.completions`: each stage's completions of known kinds and their fixed scores
- :mod:`~recipes.checks.data`, :mod:`~recipes.checks.models`, :mod:`~recipes.checks.serving`: shared data files,
  the models and tokenizers trained, child servers (free port, the QA-oracle reader)
- commands (``python -m recipes.checks.<name>``): ``preflight`` (``make train-preflight``), ``check`` and
  ``check_rag`` (``make train-check``), ``cpu`` (``make train-cpu``), ``smoke`` (``make train-smoke``),
  ``export`` (a verl checkpoint -> a Hugging Face folder)
"""
