"""Errors carry the field they concern as data (`ArchsepError.field`, `.detail`); the library's
text names fields by library names, and the CLI maps the fields that are flags with one table."""
from __future__ import annotations

import sqlite3

import pytest

from archsep.cli import FLAG_OF, as_flags, main
from archsep.errors import ArchsepError
from archsep.store import disk_full, open_store
from archsep.sweeps.file import load_file


def test_the_cli_names_a_flag_field_by_its_flag_and_leaves_other_errors_as_they_are():
    assert as_flags(ArchsepError.at("out", "cannot write to 'x'")) == "--out: cannot write to 'x'"
    assert as_flags(ArchsepError.at("store", "no results store at 'x'")) == "DIR: no results store at 'x'"
    assert as_flags(ArchsepError.at("dest", "empty path")) == "-o: empty path"
    assert as_flags(ArchsepError.at("train.lr", "must be > 0")) == "train.lr: must be > 0"
    # text that merely starts like a flag field is not rewritten: only the field, as data, is
    assert as_flags(ArchsepError("out: looks like a field")) == "out: looks like a field"
    assert set(FLAG_OF) >= {"out", "executor", "address", "workers", "set", "only", "log", "store", "sweep_file"}


def test_library_errors_name_library_fields_not_flags(tmp_path):
    with pytest.raises(ArchsepError) as e:
        open_store(tmp_path / "nothing", create=False)
    assert e.value.field == "store" and str(e.value).startswith("store: ") and "DIR" not in str(e.value)
    with pytest.raises(ArchsepError) as e:
        load_file(tmp_path / "missing.toml")
    assert e.value.field == "sweep_file" and str(e.value).startswith("sweep_file: ")


def test_the_command_line_shows_the_flags(tmp_path, capsys):
    assert main(["status", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.startswith("archsep: error: DIR: ")
    assert main(["sweep", str(tmp_path / "missing.toml")]) == 2
    assert capsys.readouterr().err.startswith("archsep: error: FILE: ")


def test_a_real_full_database_is_recognised_by_its_result_code(tmp_path):
    con = sqlite3.connect(tmp_path / "tiny.db")
    con.execute("PRAGMA max_page_count = 2")
    con.execute("CREATE TABLE t (x BLOB)")
    with pytest.raises(sqlite3.OperationalError) as e:
        for _ in range(100):
            con.execute("INSERT INTO t VALUES (?)", (b"x" * 4096,))
    assert e.value.sqlite_errorcode == sqlite3.SQLITE_FULL and disk_full(e.value)
    with pytest.raises(sqlite3.OperationalError) as other:
        con.execute("SELECT * FROM no_such_table")
    assert not disk_full(other.value)
    assert not disk_full(sqlite3.OperationalError("the message mentions a full disk but is not SQLite's"))
    con.close()
