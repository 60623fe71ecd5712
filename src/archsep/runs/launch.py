"""How a set of runs is launched: one frozen options object, checked once where it is made and
passed down whole (the CLI makes it from its flags; `run_configs` and `reproduce` take it, or
make one from their keyword arguments)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from ..errors import ArchsepError


@dataclass(frozen=True)
class Launch:
    out: Path | None = None  # the output directory and its store; None: results in memory only
    workers: int | None = 1  # None: the executor's default
    executor: str = "local"  # local | ray
    address: str | None = None  # a Ray cluster's HOST:PORT (executor ray only)
    device: str | None = None  # None: each preset's own ("auto")
    retry_errors: bool = False  # rerun stored runs whose status is error
    log: str | None = None  # mirror finished runs to mlflow | tensorboard under `out`
    progress: bool = True
    # keep each run's state at the end of its budget, for the same run with a larger budget (a
    # search's promoted trials: engine/checkpoint.py, "Ends")
    ends: bool = False
    checked: bool = dataclasses.field(default=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.out is not None and not isinstance(self.out, Path):
            object.__setattr__(self, "out", Path(self.out))

    def check(self) -> Launch:
        """Everything that can fail before a run, checked here once (an executor, a Ray address
        that does not answer, a device, ARCHSEP_THREADS, a tracker and its packages); returns
        the options marked checked, which the layers below take as they are."""
        if self.checked:
            return self
        from ..config import resolve_device
        from .executors import check_executor, threads_for

        check_executor(self.executor, self.address)  # an unreachable address fails in seconds
        if self.device is not None:
            resolve_device(self.device)
        threads_for()  # a bad ARCHSEP_THREADS is one line here, not an error in every worker
        if self.log is not None:
            from ..store.tracking import check_tracker

            check_tracker(self.log)
            if self.out is None:
                raise ArchsepError.at("log", "needs an output directory (out) to write the tracker's files into")
        return dataclasses.replace(self, checked=True)
