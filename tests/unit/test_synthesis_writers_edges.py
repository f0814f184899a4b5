"""Synthesis writers' edges: the manifest's digest of a file over one read block, a same-size file with other
bytes, a listed file gone, an uncommitted staging folder undone, discard twice, an empty split's schema, UTF-8 kept
whatever the locale."""

from __future__ import annotations

import hashlib
import json

import pyarrow.parquet as pq
import pytest

from data_synthesis import writers
from rearank.errors import RearankError


def committed(folder, text="a\n"):
    with writers.staged_outputs(folder) as outputs:
        outputs.path("stats.md").write_text(text)
    return folder


def test_the_digest_reads_a_file_larger_than_one_block(tmp_path):
    path = tmp_path / "big"
    data = bytes(range(256)) * 5000  # 1.28 MB: more than one 1 MiB read
    path.write_bytes(data)
    assert writers._sha256(path) == hashlib.sha256(data).hexdigest()


def test_verify_refuses_same_size_other_bytes_and_a_missing_file(tmp_path):
    folder = committed(tmp_path / "out")
    manifest = folder / writers.MANIFEST
    assert writers.verify(folder) == {"files": {"stats.md": {"bytes": 2, "sha256": hashlib.sha256(b"a\n").hexdigest()}}}
    (folder / "stats.md").write_text("b\n")  # same size, other bytes
    with pytest.raises(RearankError) as err:
        writers.verify(folder)
    assert str(err.value) == f"{folder / 'stats.md'} does not match {manifest}; rerun `rearank synth --overwrite`"
    (folder / "stats.md").unlink()
    with pytest.raises(RearankError) as err:
        writers.verify(folder)
    assert str(err.value) == f"{folder / 'stats.md'} does not match {manifest}; rerun `rearank synth --overwrite`"
    manifest.unlink()
    with pytest.raises(RearankError) as err:
        writers.verify(folder)
    assert str(err.value).startswith(f"{manifest}: missing or unreadable ([Errno 2] No such file or directory")
    assert str(err.value).endswith(f"); the outputs in {folder} are not a finished set")


def test_an_uncommitted_staging_folder_is_removed_and_earlier_outputs_refused_by_default(tmp_path):
    folder = committed(tmp_path / "out")
    (folder / writers.STAGING).mkdir()
    (folder / writers.STAGING / "train.parquet").write_text("half")
    writers.recover(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "stats.md"]
    with pytest.raises(RearankError, match="already holds synthesis outputs"):
        writers.StagedOutputs(folder)


def test_staging_makes_parent_folders_and_discard_twice_is_harmless(tmp_path):
    outputs = writers.StagedOutputs(tmp_path / "new" / "deeper")
    outputs.path("stats.md").write_text("x")
    outputs.discard()
    outputs.discard()
    assert outputs.staged == {} and list((tmp_path / "new" / "deeper").iterdir()) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(RearankError) as err:
        writers.StagedOutputs(tmp_path / "file")
    assert str(err.value) == f"--output-dir {tmp_path / 'file'} exists and is not a folder"


def test_an_empty_split_keeps_the_schema_and_jsonl_keeps_utf8(tmp_path):
    writers.write_parquet(tmp_path / "val.parquet", [])
    assert pq.read_table(tmp_path / "val.parquet").schema.equals(writers.RL_SCHEMA)
    writers.write_jsonl(tmp_path / "sft.jsonl", [{"q": "café"}, {"q": 1}])
    assert (tmp_path / "sft.jsonl").read_bytes() == '{"q": "café"}\n{"q": 1}\n'.encode()
    assert json.loads((tmp_path / "sft.jsonl").read_text().splitlines()[0]) == {"q": "café"}


def test_commit_syncs_each_file_and_the_manifest_and_returns_what_it_wrote(tmp_path, monkeypatch):
    synced = []
    real_fsync = writers.os.fsync
    monkeypatch.setattr(writers.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    outputs = writers.StagedOutputs(tmp_path / "out")
    outputs.path("stats.md").write_text("a\n")
    outputs.path("sft_val.jsonl").write_text("")
    written = outputs.commit()
    assert len(synced) == 3  # two outputs, then the manifest before its rename (the commit point)
    assert written == [tmp_path / "out" / name for name in ("stats.md", "sft_val.jsonl", "manifest.json")]
    assert outputs.staged == {}
    digest = hashlib.sha256(b"a\n").hexdigest()
    empty = hashlib.sha256(b"").hexdigest()
    assert (tmp_path / "out" / "manifest.json").read_text() == (
        '{\n "files": {\n  "stats.md": {\n   "bytes": 2,\n   "sha256": "' + digest + '"\n  },\n'
        '  "sft_val.jsonl": {\n   "bytes": 0,\n   "sha256": "' + empty + '"\n  }\n }\n}\n')


def test_earlier_outputs_are_named_in_the_refusal(tmp_path):
    folder = committed(tmp_path / "out")
    with pytest.raises(RearankError) as err:
        writers.check_output_dir(folder, overwrite=False)
    assert str(err.value) == (f"{folder} already holds synthesis outputs (stats.md, manifest.json); pass --overwrite "
                              "to replace them, or choose another --output-dir")


def test_outputs_are_utf8_whatever_the_locale(tmp_path, ascii_locale):
    writers.write_jsonl(tmp_path / "sft.jsonl", [{"q": "café"}])
    writers.write_text(tmp_path / "stats.md", "naïve\n")
    assert (tmp_path / "sft.jsonl").read_bytes() == '{"q": "café"}\n'.encode()
    assert (tmp_path / "stats.md").read_bytes() == "naïve\n".encode()


def test_manifests_are_read_as_utf8_whatever_the_locale(tmp_path, ascii_locale):
    """JSON is UTF-8 (RFC 8259): a manifest naming a file with raw non-ASCII bytes is read, verified and rolled
    forward under an ASCII locale too."""
    entry = {"bytes": 2, "sha256": hashlib.sha256(b"a\n").hexdigest()}
    manifest = json.dumps({"files": {"résumé.md": entry}}, ensure_ascii=False).encode()
    staging = tmp_path / writers.STAGING
    staging.mkdir()
    (staging / "résumé.md").write_bytes(b"a\n")
    (staging / writers.MANIFEST).write_bytes(manifest)
    writers.recover(tmp_path)  # committed but not moved into place: the next run finishes it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "résumé.md"]
    assert writers.verify(tmp_path) == {"files": {"résumé.md": entry}}
