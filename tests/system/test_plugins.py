"""Plugins: a task registered in the user's own file reaches the driver and every worker, by
--import, a sweep file's imports, an import string or an entry point; failures are one line,
before any run is stored."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from archsep import ArchsepError, plugins
from archsep.registry import Registry

PLUGIN = textwrap.dedent('''
    from dataclasses import dataclass
    import torch
    from archsep import TASKS, Batch, ClassificationTask, TaskSpec

    @TASKS.register("{name}")
    @dataclass(frozen=True)
    class CopyFirst(ClassificationTask):
        N: int = 6
        vocab: int = 3
        seed: int = 0
        @property
        def spec(self):
            return TaskSpec("tokens", self.vocab, self.N, self.vocab, "last")
        @property
        def chance_accuracy(self):
            return 1 / self.vocab
        def sample(self, n, generator):
            x = torch.randint(0, self.vocab, (n, self.N), generator=generator, device=generator.device)
            return Batch(x, x[:, 0])
''')

SWEEP = textwrap.dedent('''
    name = "plug"
    {imports}
    seeds = 2
    [base]
    task = "{task}"
    train = {{ budget = 640, eval_size = 64, threshold = 0.05 }}
    [[arms]]
    label = "TF"
    arch = "tf-preln"
    model_params = {{ layers = 1, width = 16, heads = 1 }}
    [[arms]]
    label = "LSTM"
    arch = "lstm"
    model_params = {{ hidden = 8 }}
''')


def archsep(*args: str, cwd: Path, code: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "archsep", *args]
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=300)
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    done.pid = proc.pid  # the driver's
    return done


def stored(out: Path) -> list[dict]:
    from archsep import open_store

    if not (out / "archsep.db").exists():
        return []
    with open_store(out, create=False) as s:
        return s.rows()


@pytest.fixture
def plug(tmp_path: Path) -> Path:
    (tmp_path / "copyfirst.py").write_text(PLUGIN.format(name="copy-first"))
    return tmp_path


@pytest.mark.slow
def test_a_sweep_file_imports_its_plugin_into_the_pool_workers(plug: Path):
    (plug / "s.toml").write_text(SWEEP.format(imports='imports = ["./copyfirst.py"]', task="copy-first"))
    p = archsep("sweep", "s.toml", "--out", "out", "--workers", "2", "--no-progress", cwd=plug)
    assert p.returncode == 0, p.stderr
    rows = stored(plug / "out")
    assert len(rows) == 4 and {r["status"] for r in rows} <= {"ok", "censored"}
    assert p.pid not in {r["worker_pid"] for r in rows}  # trained in the pool's workers, not in the driver


def test_import_flag_and_import_string_name_the_same_task(plug: Path):
    (plug / "s.toml").write_text(SWEEP.format(imports="", task="copy-first"))
    p = archsep("--import", "copyfirst.py", "sweep", "s.toml", "--dry-run", cwd=plug)
    assert p.returncode == 0 and "4 run(s)" in p.stdout, p.stderr
    (plug / "t.toml").write_text(SWEEP.format(imports="", task="copyfirst:CopyFirst"))
    p = archsep("sweep", "t.toml", "--out", "out", "--workers", "1", "--no-progress", cwd=plug)
    assert p.returncode == 0, p.stderr
    assert {r["status"] for r in stored(plug / "out")} <= {"ok", "censored"}


@pytest.mark.slow
def test_a_class_the_workers_cannot_import_fails_fast_and_stores_nothing(plug: Path):
    (plug / "s.toml").write_text(SWEEP.format(imports="", task="copy-first"))
    # defined in __main__ (as in a notebook cell): the driver knows it, a spawned worker cannot
    code = (PLUGIN.format(name="copy-first") + "\nimport sys\nfrom archsep.cli import main\n"
            "sys.exit(main(['sweep', 's.toml', '--out', 'out', '--workers', '2', '--no-progress']))\n")
    p = archsep(cwd=plug, code=code)
    assert p.returncode == 2
    line = p.stderr.strip().splitlines()
    assert len(line) == 1 and "in a worker process" in line[0] and "copy-first" in line[0], p.stderr
    assert stored(plug / "out") == []  # no run stored as an error


def test_a_plugin_that_fails_to_import_is_one_line_before_anything_is_made(tmp_path: Path):
    (tmp_path / "broken.py").write_text("import archsep\nraise RuntimeError('boom at import')\n")
    (tmp_path / "s.toml").write_text(SWEEP.format(imports='imports = ["./broken.py"]', task="qstr"))
    p = archsep("sweep", "s.toml", "--out", "out", cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "broken.py" in p.stderr and "boom at import" in p.stderr
    assert not (tmp_path / "out").exists()
    p = archsep("--import", "no_such_module_xyz", "list", cwd=tmp_path)
    assert p.returncode == 2 and "no_such_module_xyz" in p.stderr and p.stderr.count("\n") == 1
    p = archsep("--import", "missing.py", "list", cwd=tmp_path)
    assert p.returncode == 2 and "missing.py" in p.stderr and "does not exist" in p.stderr


def test_registering_again_is_fine_for_the_same_class_and_an_error_for_another():
    reg: Registry = Registry("thing")

    def make(body: str):
        ns: dict = {"__name__": "cellmodule"}
        exec(f"class Thing:\n    x = {body}\n", ns)
        return ns["Thing"]

    first = make("1")
    reg.register("t")(first)
    again = make("2")  # a notebook cell run twice: the same module and name
    assert reg.register("t")(again) is again and reg.get("t") is again
    other = type("Other", (), {})
    with pytest.raises(ArchsepError, match="already registered"):
        reg.register("t")(other)


def test_import_strings_must_name_a_class_of_the_registry():
    from archsep import TASKS

    with pytest.raises(ArchsepError, match="not a subclass"):
        TASKS.get("archsep.models.ffn:FFNConfig")
    with pytest.raises(ArchsepError, match="has no attribute"):
        TASKS.get("archsep.tasks.qstr:NoSuchTask")
    cls = TASKS.get("archsep.tasks.index_lookup:IndexLookup")
    assert cls is TASKS.get("index-lookup")


def test_a_worker_without_the_files_gets_their_source(tmp_path: Path):
    """A Ray node without the plugin's files: `activate` writes the shipped source and imports it."""
    (tmp_path / "shipped_plugin.py").write_text(PLUGIN.format(name="shipped-task"))
    code = textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from archsep import plugins
        plugins.load("shipped_plugin")
        (p,) = [p for p in plugins.payload() if p.module == "shipped_plugin"]
        print(repr(p))
    ''')
    p = archsep(cwd=tmp_path, code=code)
    assert p.returncode == 0, p.stderr
    plugin = eval(p.stdout.strip(), {"Plugin": plugins.Plugin})
    assert plugin.files and plugin.files[0][0] == "shipped_plugin.py"
    moved = plugins.Plugin(plugin.module, str(tmp_path / "elsewhere" / "shipped_plugin.py"), plugin.files)
    code = textwrap.dedent(f'''
        from archsep import plugins, TASKS
        plugins.activate([plugins.Plugin({moved.module!r}, {moved.root!r}, {moved.files!r})])
        print(TASKS.get("shipped-task").__module__)
    ''')
    p = archsep(cwd=Path("/"), code=code)
    assert p.returncode == 0 and p.stdout.strip() == "shipped_plugin", p.stderr


def test_an_entry_point_registers_on_first_use(tmp_path: Path):
    site = tmp_path / "site"
    (site / "ep_plugin").mkdir(parents=True)
    (site / "ep_plugin" / "__init__.py").write_text(PLUGIN.format(name="ep-task"))
    dist = site / "ep_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[archsep.plugins]\nep = ep_plugin\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    p = subprocess.run([sys.executable, "-m", "archsep", "list"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "ep-task" in p.stdout, p.stderr
    code = "from archsep import TASKS; print(TASKS.get('ep-task').__module__)"
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "ep_plugin", p.stderr


def test_an_edited_plugin_is_said_when_its_stored_runs_are_reused(plug: Path):
    """Issue 55: a run's id names its config, not its code; each run keeps its plugin code's
    fingerprint, and a rerun after the plugin changed says that its stored runs came from other
    code (built-in code is never flagged)."""
    (plug / "s.toml").write_text(SWEEP.format(imports='imports = ["./copyfirst.py"]', task="copy-first"))
    p = archsep("sweep", "s.toml", "--out", "out", "--workers", "1", "--no-progress", cwd=plug)
    assert p.returncode == 0, p.stderr
    import json

    codes = {r["run_id"]: (json.loads(r["extra"]) if isinstance(r.get("extra"), str) else r.get("extra") or {})
             for r in stored(plug / "out")}
    assert all("code" in e and set(e["code"]) == {"task"} for e in codes.values())  # the task is the plugin's
    again = archsep("sweep", "s.toml", "--out", "out", "--workers", "1", "--no-progress", cwd=plug)
    assert again.returncode == 0 and "other plugin code" not in again.stderr
    (plug / "copyfirst.py").write_text(PLUGIN.format(name="copy-first").replace("x[:, 0]", "x[:, 1]"))
    edited = archsep("sweep", "s.toml", "--out", "out", "--workers", "1", "--no-progress", cwd=plug)
    assert edited.returncode == 0, edited.stderr
    line = [ln for ln in edited.stderr.splitlines() if "other plugin code" in ln]
    assert len(line) == 1 and "4 stored run(s) of copy-first/" in line[0]
