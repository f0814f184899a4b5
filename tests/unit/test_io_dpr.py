"""DPR's psgs_w100.tsv: header sniffed, CSV quoting undone, a bad line named by file and line."""

from __future__ import annotations

import pytest

from rearank.data.packs import load_docs
from rearank.errors import FormatError
from rearank.io.dpr import is_dpr_tsv, read_dpr_passages


def test_reads_dpr_passages_with_quotes(tmp_path):
    path = tmp_path / "psgs_w100.tsv"
    path.write_text('id\ttext\ttitle\n1\t"Aaron ( or ; ""Aharon"") is a prophet"\tAaron\n2\tplain\tZ\n', encoding="utf-8")
    assert is_dpr_tsv(path) and not is_dpr_tsv(tmp_path / "missing.tsv")
    assert load_docs(path) == {"1": ("Aaron", 'Aaron ( or ; "Aharon") is a prophet'), "2": ("Z", "plain")}
    assert read_dpr_passages(path, {"2"}) == {"2": ("Z", "plain")}


def test_a_short_line_is_named(tmp_path):
    path = tmp_path / "psgs_w100.tsv"
    path.write_text("id\ttext\ttitle\n1\tonly two\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"psgs_w100.tsv:2.*3 tab-separated fields"):
        read_dpr_passages(path)
