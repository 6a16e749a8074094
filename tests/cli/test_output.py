"""``Output``: each kind of result shown one way, whatever command shows it."""
from __future__ import annotations

import json

import pyarrow as pa

from coordinator.cli.output import Output, count, literal, markup_literal, short, write_records

RECORDS = pa.table({"city": ["Oslo", None], "population": [709000, 291000]})


def test_columns_are_left_aligned_two_spaces_apart_without_trailing_blanks(capsys):
    Output().columns(("dataset", "kind"), [("a.b", "root"), ("c", "")])
    assert capsys.readouterr().out == "dataset  kind\na.b      root\nc\n"


def test_records_as_json_csv_and_a_table(capsys):
    Output("json").records(RECORDS)
    assert json.loads(capsys.readouterr().out) == [{"city": "Oslo", "population": 709000},
                                                   {"city": None, "population": 291000}]
    Output("csv").records(RECORDS)
    assert capsys.readouterr().out == '"city","population"\n"Oslo",709000\n,291000\n'
    Output("table").records(RECORDS, null="NULL", max_rows=1)
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].split() == ["city", "population"] and shown[1].split() == ["Oslo", "709000"]
    assert len(shown) == 2


def test_records_written_to_a_file_are_what_stdout_shows(tmp_path, capsys):
    Output("json").records(RECORDS)
    with open(tmp_path / "r.json", "wb") as sink:
        write_records(RECORDS, "json", sink)
    assert (tmp_path / "r.json").read_text() == capsys.readouterr().out


def test_errors_and_notes_go_to_stderr(capsys):
    Output().error("no dataset named x")
    Output().note("coord: aborted")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == "coord: error: no dataset named x\ncoord: aborted\n"


def test_words():
    assert (short(bytes(range(16))), short(None)) == ("000102030405", "-")
    assert (count(1, "block"), count(2, "block"), count(0, "file")) == ("1 block", "2 blocks", "0 files")


# --- someone else's data, shown as written ----------------------------------------------------

HOSTILE = "[/oops] [red]x[/red] [link=https://e.x]y[/link] :smile: \x1b[31mESC\r\a\u202e"
SHOWN = "[/oops] [red]x[/red] [link=https://e.x]y[/link] :smile: \\e[31mESC\\r\\a\\u202e"


def test_literal_escapes_control_characters_and_keeps_lines_but_in_a_cell():
    assert literal(HOSTILE) == SHOWN
    assert literal("a\tb\nc\x00\x9b") == "a\tb\nc\\x00\\x9b"
    assert literal("a\tb\nc", cell=True) == "a\\tb\\nc"


def test_a_table_shows_markup_emoji_codes_and_control_characters_as_written(capsys):
    Output("table").records(pa.table({HOSTILE: [HOSTILE]}))
    header, row = capsys.readouterr().out.splitlines()
    assert header.strip() == SHOWN and row.strip() == SHOWN


def test_lines_notes_columns_and_text_are_literal(capsys):
    Output().line(HOSTILE)
    Output().columns(("name",), [(HOSTILE + "\n",)])
    Output().text(HOSTILE)
    Output().note(HOSTILE)
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [SHOWN, "name", SHOWN + "\\n", SHOWN]
    assert captured.err == SHOWN + "\n"


def test_a_tree_takes_data_into_its_markup_literally(capsys):
    from rich.tree import Tree

    Output().rich(Tree(f"[bold]{markup_literal(HOSTILE)}[/bold]"))
    assert capsys.readouterr().out == SHOWN + "\n"
