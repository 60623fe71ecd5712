"""Discovery (issue 55): `archsep list` cuts a summary at a sentence's end, never at "Fig." or
"Eq."; a mixer's line says what the mixer is before the block stack every mixer shares; an
unknown arch in a sweep file or a preset's --set says it may be a plugin's and how to load one."""
from __future__ import annotations

from pathlib import Path

import pytest

from archsep.cli import main
from archsep.cli.describe import ABBREVIATIONS, summary_line
from archsep.models import MODELS
from sweep_util import tiny_toml

STEMS = ("Fig", "Eq", "Thm", "Prop", *ABBREVIATIONS)


def _list(capsys) -> dict[str, dict[str, str]]:
    """{section: {name: summary}} of `archsep list`, each summary without its [bracketed] tail."""
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in out.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            current = sections.setdefault(line[:-1], {})
        elif line.startswith("  "):
            name, _, rest = line.strip().partition(" ")
            current[name] = rest.strip().split("  [")[0]
    return sections


def test_list_summaries_end_at_a_sentence_not_at_an_abbreviation(capsys):
    sections = _list(capsys)
    assert {"presets", "tasks", "archs", "links"} <= set(sections)
    for section, entries in sections.items():
        assert entries, section
        for name, summary in entries.items():
            text = summary.removesuffix(" …")  # cut at the width: the next word is gone, not the sentence
            assert not any(text.endswith(f" {stem}.") or text.endswith(f"({stem}.") or text == f"{stem}."
                           for stem in STEMS), (section, name, summary)
    # the presets that cite a figure or an equation keep the citation whole
    assert sections["presets"]["dyck-fig2"].endswith("(paper A, Fig. 2 right)")
    assert sections["presets"]["qstr-fig2"].endswith("the Eq. A.2 block (paper B, Fig. 2)")
    assert sections["presets"]["nn-fig"].endswith("(paper A, Thm. 7)")


def test_summary_line_cuts_at_the_first_real_sentence_end():
    class Entry:
        description = ("Recall (Poli et al. 2024; cf. Jing et al. 2019, e.g. Fig. 3, Eq. 2 vs. Thm. 1, Prop. 3 "
                       "and App. B, Sec. 4). The second sentence is not shown.")

    assert summary_line(Entry) == Entry.description.split(" The second")[0]

    class Long:
        description = "word " * 40 + "(Fig. 2). Not shown."

    line = summary_line(Long, limit=50)
    assert len(line) <= 50 and line.endswith(" …") and "Fig" not in line


def _mixers() -> list[str]:
    """The models built on the shared pre-LN block stack (`models/mixers/`)."""
    return [n for n in MODELS.names() if MODELS.get(n).__module__.startswith("archsep.models.mixers.")]


def test_a_mixers_list_line_says_what_it_is_before_the_block_stack(capsys):
    archs = _list(capsys)["archs"]
    mixers = _mixers()
    assert len(mixers) >= 11, mixers
    for name in mixers:
        summary = archs[name]
        assert not summary.startswith("`layers`"), (name, summary)
        head, sep, what = summary.partition(": ")
        assert sep and head and not what.startswith("`layers`"), (name, summary)  # 'NAME: the mechanism, ...'
        assert "`layers`" not in what[:40], (name, summary)


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith("archsep: error: "), err
    return err


def test_an_unknown_arch_in_a_sweep_file_says_it_may_be_a_plugin(tmp_path: Path, capsys):
    sweep = tmp_path / "mingru.toml"
    sweep.write_text(tiny_toml(arms=("tf-b", "ffn")).replace('arch = "ffn"', 'arch = "mingru"'))
    code = main(["sweep", str(sweep), "--out", str(tmp_path / "out")])
    err = _one_error(capsys)
    assert code == 2, err
    assert "arch: unknown value 'mingru'; allowed: " in err  # the message as it was, the hint after it
    assert "--import" in err and "imports = [...]" in err
    assert not (tmp_path / "out").exists()  # refused before anything was made


@pytest.mark.parametrize("setting, start", [("arch=mingru", "arch: unknown value 'mingru'"),
                                            ("task=my-task", "task: unknown value 'my-task'")])
def test_an_unknown_name_in_a_presets_set_says_it_may_be_a_plugin(tmp_path: Path, capsys, setting, start):
    code = main(["sweep", "qstr-fig1a", "--set", setting, "--dry-run", "--out", str(tmp_path / "out")])
    err = _one_error(capsys)
    assert code == 2 and start in err and "--import" in err, err


def test_an_unknown_value_that_no_plugin_supplies_has_no_plugin_hint(tmp_path: Path, capsys):
    sweep = tmp_path / "s.toml"
    sweep.write_text(tiny_toml())
    code = main(["sweep", str(sweep), "--executor", "dask", "--out", str(tmp_path / "out")])
    err = _one_error(capsys)
    assert code == 2 and "unknown value 'dask'" in err and "--import" not in err, err
