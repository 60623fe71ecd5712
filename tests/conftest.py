import contextlib
import inspect
import re

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # tests run on 2 cores next to other work; one thread is also the fastest for these sizes
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
    """The dry run's step-cost cache (runs/timing.py) goes to a folder of this test session, never
    the user's ~/.cache: tests neither read what a real dry run measured nor leave files there."""
    import os

    old = os.environ.get("ARCHSEP_CACHE_DIR")
    os.environ["ARCHSEP_CACHE_DIR"] = str(tmp_path_factory.mktemp("archsep-cache"))
    yield
    if old is None:
        os.environ.pop("ARCHSEP_CACHE_DIR", None)
    else:
        os.environ["ARCHSEP_CACHE_DIR"] = old


@pytest.fixture
def registered():
    """`registered(REGISTRY, name, cls)`: `cls` under `name` for this test alone
    (`Registry.temporary`); a class left in a registry would join every later test that loops
    over it."""
    with contextlib.ExitStack() as stack:
        yield lambda registry, name, cls=None: stack.enter_context(registry.temporary(name, cls))


SPAWNS = re.compile(r"\bsubprocess\.(run|Popen|check_output|check_call)\(|\bPopen\(|\b(run_cli|cli)\("
                    r"|\bmp\.get_context\(")


def pytest_collection_modifyitems(config, items):
    """A test that starts a process (the CLI in a fresh interpreter, a worker pool, Ray) is
    marked `slow`: `pytest -m "not slow"` is the inner loop, the whole suite the README's
    command. Read from the test's own source, so a new test is marked without an edit.

    The suite runs in one process per core (pytest-xdist, `addopts` in pyproject.toml); every
    Ray test goes to one of them (`xdist_group`), so two local clusters never start at once on
    two cores."""
    for item in items:
        fn = getattr(item, "function", None)
        try:
            src = inspect.getsource(fn) if fn is not None else ""
        except (OSError, TypeError):
            continue
        ray = item.get_closest_marker("ray") is not None
        if SPAWNS.search(src) or ray:
            item.add_marker(pytest.mark.slow)
        if ray:
            item.add_marker(pytest.mark.xdist_group("ray"))
