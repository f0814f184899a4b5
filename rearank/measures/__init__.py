"""Measures: trec_eval-exact IR metrics (:mod:`.ir`), the nDCG of rewards (:mod:`.ndcg`), answer metrics (EM, F1,
Hit, answer recall: :mod:`.answers`), rank-biased overlap (:mod:`.rbo`) and paired significance tests (:mod:`.significance`)."""
