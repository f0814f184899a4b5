"""This machine: the CPU settings every process starts with (:mod:`.startup`) and the GPU node's readings and checks
-- driver, NCCL, GPUs, attention kernel -- behind ``rearank doctor`` and ``make train-preflight`` (:mod:`.node`).
Standard library only: the package is imported before torch."""
