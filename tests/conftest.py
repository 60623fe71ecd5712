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
    """The dry run's step-cost cache (engine/cost.py) goes to a folder of this test session, never
    the user's ~/.cache: tests neither read what a real dry run measured nor leave files there."""
    import os

    old = os.environ.get("ARCHSEP_CACHE_DIR")
    os.environ["ARCHSEP_CACHE_DIR"] = str(tmp_path_factory.mktemp("archsep-cache"))
    yield
    if old is None:
        os.environ.pop("ARCHSEP_CACHE_DIR", None)
    else:
        os.environ["ARCHSEP_CACHE_DIR"] = old
