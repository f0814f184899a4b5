"""Generation backends behind one protocol (see :mod:`rearank.backends.base`)."""
