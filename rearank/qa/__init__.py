"""QA-level helpers the RAG methods need below them: ground-truth parsing (:mod:`.truth`) and the rule every QA
oracle answers by (:mod:`.oracle`)."""
