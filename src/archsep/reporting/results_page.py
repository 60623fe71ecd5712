"""The committed results' index, `docs/results/README.md`, generated from the files beside it.

Every number on the page comes from a committed file: a folder's `summary.json` (its claims,
each with its verdict and the numbers in its text; a size preset's mean test accuracies; a
sample preset's exponents), its `runs.csv` (how many runs, their own wall times summed) and the
first line of its `PROVENANCE` (what made it). Nothing is typed by hand: `render` is a pure
function of those files, `scripts/results_page.py` writes the page, and a test fails when the
committed page and a fresh rendering disagree.

Reading the folder is reading data: JSON and CSV only, never a module.
"""
from __future__ import annotations

import csv
import json
import math
import re
from collections import defaultdict
from pathlib import Path

from ..analysis.size import accuracy_table as accuracy_table_of
from ..analysis.size import size_points
from ..results import Claim

PAGE = "README.md"
VERDICTS = ("held", "did not hold", "no verdict")
SCRIPT = "scripts/results_page.py"
MAX_LISTED = 12  # more claims than this fold under <details>; more fits are left to summary.txt


def verdict(claim: dict) -> str:
    """A stored claim's verdict, as `Claim.verdict` says it (from `held`: summaries written before
    the verdict field read the same)."""
    return Claim(claim.get("kind", "claim"), claim.get("text", ""), claim.get("held")).verdict


def read_runs(folder: Path) -> list[dict]:
    path = folder / "runs.csv"
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def run_time(rows: list[dict]) -> float | None:
    """runs.csv's `wall_s` summed (None where the file has no such column)."""
    walls = [float(r["wall_s"]) for r in rows if r.get("wall_s") not in (None, "")]
    return sum(walls) if walls else None


def time_by_arm(rows: list[dict]) -> str:
    """The runs' own wall times summed per arm (runs.csv's label, else arch), where there are two
    arms or more."""
    by: dict[str, float] = defaultdict(float)
    for r in rows:
        arm = r.get("label") or r.get("arch")
        if arm and r.get("wall_s") not in (None, ""):
            by[arm] += float(r["wall_s"])
    if len(by) < 2:
        return ""
    return "run time by arm: " + ", ".join(f"{arm} {hours(t)}" for arm, t in sorted(by.items()))


def standing(folder: Path, first: str) -> str:
    """'current', or what the folder's place or its PROVENANCE's first line (`first`) says it is:
    'superseded' or 'former' (a design or claims the preset has since replaced)."""
    if folder.name == "former" or folder.parent.name == "former" or first.lower().startswith(("superseded", "former")):
        return "former"
    return "current"


def first_line(folder: Path) -> str:
    prov = folder / "PROVENANCE"
    if not prov.is_file():
        return ""
    return prov.read_text(errors="replace").split("\n", 1)[0].strip()


def hours(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def pct(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def accuracy_table(d: dict) -> list[str]:
    """A size summary's mean test accuracy per model and N (over the cells that have one), with
    the best trivial baseline's row."""
    acc = {lab: {N: v for (N, _), v in by.items()} for lab, by in accuracy_table_of(d.get("cells") or []).items()}
    Ns = sorted({n for by in acc.values() for n in by})
    if not Ns:
        return []
    out = ["| model | " + " | ".join(f"N = {n}" for n in Ns) + " |", "|---" * (len(Ns) + 1) + "|"]
    for lab in sorted(acc):
        out.append(f"| {lab} | " + " | ".join(pct(acc[lab].get(n)) for n in Ns) + " |")
    best: dict[tuple[str, int], float] = {}
    for b in d.get("baselines") or []:
        if isinstance(b.get("N"), int) and b.get("best_acc") is not None:
            best[(b.get("variant") or "", b["N"])] = float(b["best_acc"])
    for variant in sorted({v for v, _ in best}):
        name = "best trivial baseline" + (f" [{variant}]" if variant else "")
        out.append(f"| {name} | " + " | ".join(pct(best.get((variant, n))) for n in Ns) + " |")
    return out


def exponent_table(d: dict) -> list[str]:
    fits = d.get("fits") or {}
    if not fits or len(fits) > MAX_LISTED:  # an atlas's many fits: its summary.txt has them
        return []
    out = ["| arm | exponent alpha (samples ~ x^alpha along the figure's axis) | 95% interval | seeds | censored runs "
           "in the fit |", "|---|---|---|---|---|"]
    for arm, f in sorted(fits.items()):
        if f.get("alpha") is None:
            continue
        ci = f.get("ci") or [None, None]
        interval = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if None not in ci else "–"
        out.append(f"| {arm} | {f['alpha']:.2f} | {interval} | {f.get('seeds', '–')} | "
                   f"{'yes' if f.get('censored_data') else 'no'} |")
    return out


def folders(root: Path) -> list[Path]:
    """Every folder under `root` with a summary.json, at any depth (no links followed), in order."""
    out = [p.parent for p in sorted(root.rglob("summary.json")) if not p.is_symlink() and not p.parent.is_symlink()]
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def other_folders(root: Path) -> list[Path]:
    """Top-level folders with runs.csv but no summary.json: calibrations and sweeps."""
    return [p for p in sorted(root.iterdir()) if p.is_dir() and not p.is_symlink()
            and (p / "runs.csv").is_file() and not (p / "summary.json").is_file()]


def load(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def search_lines(d: dict) -> list[str]:
    """A search summary's search: its schedule, what its trials cost, each winner."""
    c, srch = d.get("search_cost"), d.get("search")
    if not c or not srch:
        return []
    share = f" ({100 * c['trial_steps'] / c['every_trial_to_the_end']:.0f}%)" if c["every_trial_to_the_end"] else ""
    out = [f"search: each family's best of {srch['trials']} trials, rungs at {srch['steps']} steps keeping "
           f"{srch['keep']:g}" + (f" (and ties within {srch['tie']:g} standard errors)" if srch.get("tie") else "")
           + f"; the trials trained {c['trial_steps']} of the {c['every_trial_to_the_end']} steps of "
           f"every trial to the last rung{share}, {hours(c['trials_wall_s'])} of their runs' own time, and the "
           f"winners' other runs {hours(c['winners_wall_s'])}", ""]
    for w in d.get("winners") or []:
        out.append(f"- winner {w['label']} at N = {w['N']}: "
                   + ", ".join(f"{k.split('.')[-1]} {v}" for k, v in w["params"].items()))
    return out + ([""] if d.get("winners") else [])


def render(root: Path) -> str:
    """The page, from the committed files under `root` (docs/results)."""
    rows, sections = [], []
    for folder in folders(root):
        rel = folder.relative_to(root).as_posix()
        d = load(folder)
        runs, line = read_runs(folder), first_line(folder)
        claims = d.get("claims") or []
        verdicts = [verdict(c) for c in claims]
        stand = standing(folder, line)
        rows.append(f"| [{rel}]({rel}/) | `{d.get('preset', '?')}` | {d.get('scale', '?')} | {stand} | {len(runs)} | "
                    f"{hours(run_time(runs))} | " + " | ".join(str(verdicts.count(v)) for v in VERDICTS) + " |")
        sec = [f"### {rel}", ""]
        if stand == "former":
            sec += ["*Former: kept for the record; its PROVENANCE's first line says what replaced it.*", ""]
        if line:
            sec += [f"PROVENANCE: `{line}`", ""]
        if (arms := time_by_arm(runs)):
            sec += [arms + (" (the winners' runs only)" if d.get("search_cost") else ""), ""]
        sec += search_lines(d)
        if d.get("pending"):
            sec += [f"runs pending when written: {d['pending']}", ""]
        for extra in (accuracy_table(d), exponent_table(d)):
            if extra:
                sec += extra + [""]
        listed = [f"- **{v}**: {c.get('text', '').strip()}" for v, c in zip(verdicts, claims)]
        if len(listed) > MAX_LISTED:
            listed = [f"<details><summary>{len(claims)} claims</summary>", "", *listed, "", "</details>"]
        if listed:
            sec += listed + [""]
        sections.append("\n".join(sec))
    head = [
        "# Committed results",
        "",
        f"Generated by `{SCRIPT}` from the `summary.json`, `runs.csv` and `PROVENANCE` files of each",
        "folder here; do not edit it by hand (`tests/results/test_results_page.py` fails when it and those files",
        "disagree). Each claim is quoted from its summary with its verdict: *held*, *did not hold*, or",
        "*no verdict* (a control failed or censored runs could have produced the result). *run time* is the",
        "runs' own wall times summed (runs.csv's `wall_s`; one core each, usually), not the span of the",
        "sessions that made them. A folder's PROVENANCE says how, when and on what machine.",
        "",
        "| folder | preset | scale | standing | runs | run time | held | did not hold | no verdict |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    others = other_folders(root)
    if others:
        head += ["Calibrations and sweeps (no preset summary; their claims, if any, are in their summary.txt):", "",
                 "| folder | runs | run time | what |", "|---|---|---|---|"]
        for folder in others:
            runs = read_runs(folder)
            rel = folder.relative_to(root).as_posix()
            head.append(f"| [{rel}]({rel}/) | {len(runs)} | {hours(run_time(runs))} | `{first_line(folder)}` |")
        head.append("")
    return "\n".join(head + ["## Each folder's claims", ""] + sections).rstrip() + "\n"


# --- paper A's Transformer-vs-recurrent claims by protocol: blocks in the README and paper_a.md ---
# Each file holds its block between these two lines; `write` replaces what is between them.
BLOCKS = {"README.md": (("protocol-counts", "docs/results/"),),
          "docs/paper_a.md": (("protocol-claims", "results/"), ("lookup-protocols", "results/"),
                              ("search-controls", "results/"))}
BEGIN, END = "<!-- generated by scripts/results_page.py: {}; do not edit -->", "<!-- end of generated: {} -->"
_VERSUS = re.compile(r"N=(\d+): ([^:;]+?) below ([^:;]+?): ")  # labels hold no colon


def _why(text: str, N: str) -> str:
    """The reason a claim's text gives for its missing verdict: "no verdict: REASON; N=..." or
    "no verdict (REASON): N=..." (a cell not run yet); "" for a claim with a verdict."""
    if "no verdict: " in text:
        return text.split("no verdict: ", 1)[1].split(f"; N={N}: ", 1)[0]
    m = re.search(r"no verdict \(([^)]*)\)", text)
    return m.group(1) if m else ""


def versus_claims(root: Path) -> list[dict]:
    """Every current paper-A claim that sets a recurrent arm and a Transformer in order (an
    `ordering` claim with a protocol and a TF on exactly one side), in folder order: its
    folder, protocol, N, arms, verdict, the two means and, for no verdict, the reason it gives."""
    out = []
    for folder in folders(root):
        if standing(folder, first_line(folder)) != "current":
            continue
        for c in load(folder).get("claims") or []:
            v, text = c.get("values") or {}, c.get("text", "")
            m = ([None, *_VERSUS.finditer(text)])[-1]  # the claim itself is last, after any control it quotes
            if c.get("kind") != "ordering" or "protocol" not in v or not m:
                continue
            worse, better = m.group(2), m.group(3)
            if worse.startswith("TF") == better.startswith("TF"):  # a Transformer on one side only
                continue
            why = _why(text, m.group(1))
            out.append({"folder": folder.relative_to(root).as_posix(), "protocol": v["protocol"], "N": int(m.group(1)),
                        "worse": worse, "better": better, "verdict": verdict(c), "why": why,
                        "means": (v.get(worse), v.get(better))})
    return out


def protocol_counts(root: Path, link: str) -> list[str]:
    """The README's block: per preset folder and protocol, how many such claims held, did not
    hold, or have no verdict."""
    rows: dict[tuple[str, str], list[str]] = defaultdict(list)
    for c in versus_claims(root):
        rows[(c["folder"], c["protocol"])].append(c["verdict"])
    out = ["| results | protocol | Transformer-vs-recurrent claims | held | did not hold | no verdict |",
           "|---|---|---|---|---|---|"]
    for (folder, protocol), vs in rows.items():
        out.append(f"| [{folder}]({link}{folder}/) | {protocol} | {len(vs)} | "
                   + " | ".join(str(vs.count(v)) for v in VERDICTS) + " |")
    return out


def protocol_claims(root: Path, link: str) -> list[str]:
    """paper_a.md's block: every such claim, its protocol, verdict and means (the summaries' own)."""
    out = ["| results | protocol | N | claim | verdict | mean test accuracy | why no verdict |",
           "|---|---|---|---|---|---|---|"]
    for c in versus_claims(root):
        a, b = c["means"]
        out.append(f"| [{c['folder']}]({link}{c['folder']}/) | {c['protocol']} | {c['N']} | {c['worse']} below "
                   f"{c['better']} | {c['verdict']} | {pct(a)} vs {pct(b)} | {c['why']} |")
    return out


# index lookup's arms under each protocol, family by family: the folders of its scales, in order
LOOKUP = (("lookup-fig2-cpu", "same size (width 64)"), ("lookup-fig2-search", "the paper's search"),
          ("lookup-fig2-search-steps", "the paper's search, to 250k steps"),
          ("lookup-fig2-search-paper", "the paper's search, its bounds"))


def _family(label: str) -> str:
    """An arm's family: LSTM-64 -> LSTM; a Transformer keeps its size (TF-(1,64))."""
    return label if label.startswith("TF") else re.sub(r"-\d+$", "", label)


def lookup_protocols(root: Path, link: str) -> list[str]:
    """paper_a.md's second block: index lookup family by family, a column per scale and length
    done: at each scale's shortest length the family's control (held or not, its mean), at the
    others its mean test accuracy over seeds, with the verdict of "below TF-(1,64)" where the
    scale claims it (the Transformer: its mean)."""
    cols: list[tuple[str, str, int]] = []  # (folder, protocol, N)
    cells: dict[tuple[str, int], dict[str, str]] = defaultdict(dict)
    order: dict[str, None] = {}  # the families in the order the scales' controls name them
    versus = versus_claims(root)
    for name, protocol in LOOKUP:
        if not (root / name / "summary.json").is_file():
            continue
        d = load(root / name)
        claims = d.get("claims") or []
        controls = [c for c in claims if c.get("kind") == "control" and "label" in (c.get("values") or {})]
        means = {(p["label"], p["N"]): p["mean"] for p in size_points(d.get("cells") or [])}
        Ns = sorted({int(N) for _, N in means})
        cols += [(name, protocol, N) for N in Ns]
        for (label, N), m in means.items():
            cells[(name, int(N))][_family(label)] = pct(m)
        for c in controls:
            v = c["values"]
            order[_family(v["label"])] = None
            cells[(name, int(v["N"]))][_family(v["label"])] = f"control {verdict(c)} ({pct(v.get('mean'))})"
        for c in versus:
            if c["folder"] == name:
                cells[(name, c["N"])][_family(c["worse"])] = f"{pct(c['means'][0])}: below TF {c['verdict']}"
    families = list(dict.fromkeys([*order, *(f for col in cells.values() for f in col)]))
    families.sort(key=lambda f: not f.startswith("TF"))  # the Transformer first
    out = ["| family | " + " | ".join(f"[{p}]({link}{n}/), N = {N}" for n, p, N in cols) + " |",
           "|---|" + "---|" * len(cols)]
    out += [f"| {f} | " + " | ".join(cells[(n, N)].get(f, "") for n, _, N in cols) + " |" for f in families]
    return out if cols else []


def _params(p: dict) -> str:
    """A winner's configuration, short: train.lr 0.001 -> lr 1e-3, model_params.layers 2 -> layers 2."""
    def num(v: object) -> str:
        if not isinstance(v, float):
            return str(v)
        short = f"{v:.0e}".replace("e-0", "e-").replace("e+00", "")
        return short if float(short) == v else f"{v:g}"

    return ", ".join(f"{k.split('.')[-1]} {num(v)}" for k, v in p.items()) or "as declared"


def search_controls(root: Path, link: str) -> list[str]:
    """paper_a.md's third block: under the paper's search (every current folder whose summary
    names winners), each arm's positive control, its verdict and mean test accuracy, and the
    winning configuration it read: the first thing a longer length's verdict rests on."""
    out = ["| results | N | arm | control | mean test accuracy | winner |", "|---|---|---|---|---|---|"]
    for folder in folders(root):
        d = load(folder)
        if standing(folder, first_line(folder)) != "current" or not d.get("winners"):
            continue
        won = {(w["label"], int(w["N"])): w.get("params") or {} for w in d["winners"]}
        searched = set((d.get("search") or {}).get("arms") or ())
        name = folder.relative_to(root).as_posix()
        for c in d.get("claims") or []:
            v = c.get("values") or {}
            if c.get("kind") != "control" or "label" not in v or "N" not in v:
                continue
            params = won.get((v["label"], int(v["N"])))
            winner = (_params(params) if params is not None
                      else "not found yet (the search not finished)" if v["label"] in searched else "not searched")
            out.append(f"| [{name}]({link}{name}/) | {v['N']} | {v['label']} | {verdict(c)} | {pct(v.get('mean'))} | "
                       f"{winner} |")
    return out if len(out) > 2 else []


RENDER = {"protocol-counts": protocol_counts, "protocol-claims": protocol_claims, "lookup-protocols": lookup_protocols,
          "search-controls": search_controls}


def block(root: Path, name: str, link: str) -> str:
    return "\n".join([BEGIN.format(name), *RENDER[name](root, link), END.format(name)])


def with_block(text: str, root: Path, doc: str) -> str:
    """`text` (a doc) with its generated blocks rendered again from `root`; unchanged without."""
    for name, link in BLOCKS[doc]:
        begin, end = BEGIN.format(name), END.format(name)
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = head + block(root, name, link) + rest.split(end, 1)[1]
    return text


def stale_docs(root: Path) -> dict[str, str]:
    """The docs (BLOCKS, beside `root`'s repository) whose generated block differs from `root`'s
    files, each with its text rendered again."""
    repo, out = root.resolve().parents[1], {}
    for doc in BLOCKS:
        if (repo / doc).is_file():
            text = (repo / doc).read_text()
            if (new := with_block(text, root, doc)) != text:
                out[doc] = new
    return out


def write(root: Path) -> Path:
    """Write the page beside the folders it indexes (a replace, never through a link), and the
    generated blocks of the docs that have one (`BLOCKS`)."""
    from ..fileio import atomic_write

    repo = root.resolve().parents[1]
    for doc, text in stale_docs(root).items():
        atomic_write(repo / doc, text, field="dest", example=doc)
    return atomic_write(root / PAGE, render(root), field="dest", example="docs/results/README.md")
