"""``rearank doctor`` on this machine (its real checks), its exit code, the data-pack and server checks against real
folders and servers, and a requested check that is not ok. The command is called through its module: its entry
point appears only once the package is reinstalled."""

from __future__ import annotations

import argparse
import json
import threading

import pytest

from rearank.backends.chat_server import ChatServer
from rearank.cli import doctor
from rearank.errors import RearankError
from rearank.server import serve_in_thread
from tests.serving import oracle_service


def run_doctor(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    parser = argparse.ArgumentParser(prog="rearank")
    doctor.register(parser.add_subparsers())
    args = parser.parse_args(["doctor", *argv])
    code = args.func(args)
    return code, capsys.readouterr().out


def test_every_check_runs_here_and_the_exit_code_follows_the_failures(capsys):
    code, out = run_doctor(["--json"], capsys)
    rows = json.loads(out)
    assert [r["name"] for r in rows] == list(doctor.CHECKS)
    assert all(r["status"] in (doctor.OK, doctor.MISSING, doctor.FAIL) and r["found"] for r in rows)
    assert all(r["todo"] for r in rows if r["status"] != doctor.OK), rows
    assert code == int(any(r["status"] == doctor.FAIL for r in rows))
    by_name = {r["name"]: r for r in rows}
    # this venv: the embedded model, the serving stack and the shared packs are installed (make setup)
    assert by_name["model"]["status"] == by_name["serve"]["status"] == by_name["data"]["status"] == doctor.OK
    assert "dl19" in by_name["data"]["found"]

    code, out = run_doctor([], capsys)
    for name in doctor.CHECKS:
        assert f"\n{name} " in out
    assert code == int(any(r["status"] == doctor.FAIL for r in rows))


def test_a_requested_check_that_is_not_ok_fails_the_run(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "CHECKS", {"cuda": lambda: doctor.Check("cuda", doctor.MISSING, "no GPU", "use one"),
                                           "python": doctor.check_python})
    assert run_doctor([], capsys)[0] == 0
    code, out = run_doctor(["--check", "cuda"], capsys)
    assert code == 1
    assert "-> use one" in out and "needs attention: cuda" in out
    assert run_doctor(["--check", "python"], capsys)[0] == 0


def test_data_check_names_incomplete_and_absent_packs(tmp_path, monkeypatch):
    monkeypatch.setenv("REARANK_DATA", str(tmp_path))
    row = doctor.check_data()
    assert row.status == doctor.MISSING and str(tmp_path) in row.found and "rearank data fetch" in row.todo
    (tmp_path / "msmarco-v1-passage" / "dl19").mkdir(parents=True)
    (tmp_path / "msmarco-v1-passage" / "dl19" / "topics.tsv").write_text("1\tq\n")
    row = doctor.check_data()
    assert row.status == doctor.FAIL
    assert "dl19 (missing qrels.txt, run.bm25.top100.trec, docs.tsv)" in row.found


def test_base_url_check_against_real_servers(monkeypatch, capsys):
    server = ChatServer(backend=None, model_name="served-model")  # /v1/models needs no backend
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        row = doctor.check_base_url(server.base_url)
        assert row.status == doctor.OK and "served-model" in row.found
        _, out = run_doctor(["--base-url", server.base_url.removesuffix("/v1")], capsys)  # bare host: /v1 added
        assert "serves served-model" in out
    finally:
        server.shutdown()
        server.server_close()

    # a server that wants a key: refused without it, ok with $OPENAI_API_KEY
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with serve_in_thread(oracle_service({}, {}, {}, model_name="keyed", api_key="s3cret")) as url:
        row = doctor.check_base_url(url + "/v1")
        assert row.status == doctor.FAIL and "HTTP 401" in row.found and "OPENAI_API_KEY" in row.todo
        monkeypatch.setenv("OPENAI_API_KEY", "s3cret")
        assert doctor.check_base_url(url + "/v1").status == doctor.OK

    row = doctor.check_base_url("http://127.0.0.1:0/v1", timeout_s=5)  # port 0 takes no connection
    assert row.status == doctor.FAIL and "start the server" in row.todo
    assert doctor.check_base_url("ftp://host").status == doctor.FAIL


def test_check_base_url_needs_the_url(capsys):
    with pytest.raises(RearankError, match="--check base-url needs --base-url"):
        run_doctor(["--check", "base-url"], capsys)
