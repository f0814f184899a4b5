"""A run: its typed configuration (:mod:`rearank.run.config`: backend, model, method, sampling; the settings a
resume must match; :mod:`rearank.rag.config` is the same for ``rag eval``), the job that writes it to files
(:mod:`rearank.run.job`), its run and trace files (:mod:`rearank.run.files`) and its statistics (:mod:`rearank.run.stats`)."""
