import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    # tests run on 2 cores next to other work; one thread is also the fastest for these sizes
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
