"""Where runs execute. An executor takes batches of configs (each batch is trained by one
`train_many` call: runs that differ only in their seed, see `engine.planning.group_key`) and yields the
finished runs' store rows as batches complete. Only the caller (the driver) writes the store.

- `local`: a pool of spawned worker processes, one torch thread each (see `threads_for`).
- `ray`: Ray tasks on a cluster (`address`), or on a local one started on 127.0.0.1.
"""
from __future__ import annotations

import os
import socket
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Iterator, Sequence

from ..config import RunConfig, resolve_device
from ..engine.checkpoint import Checkpoints
from ..errors import ArchsepError
from ..store.rows import now, record
from ..engine.planning import plan_batches, step_flops  # noqa: F401  (plan_batches: re-exported for the runner)
from ..results import RunResult
from ..plugins import activate, payload
from .timing import cores

EXECUTORS = ("local", "ray")
RAY_CONNECT_TIMEOUT_S = 5.0


def default_workers(configs: Sequence[RunConfig]) -> int:
    """Local workers when none are asked for: one a core on the CPU, and one where the runs train
    on a GPU, whose processes would time-slice the one device (the engine stacks runs within that
    process instead). Measured on an H100 (2026-11-26): 25 processes sharing it finished none of
    qstr-fig3's RNN runs in 500 s, where one process trains such a run in 100-130 s (on an H200).
    Two processes on the H200 trained ten such runs in about 750 s, 1.5x one process's throughput
    (scripts/device/qstr_fig3_rnn.sh); one measurement on one model, so the default stays 1 and
    `--workers 2` is the user's choice."""
    if any(resolve_device(c.train.device).type == "cuda" for c in configs):
        return 1
    return cores()


MAX_THREADS = 1024


def threads_for() -> int:
    """Torch threads per run: 1, whatever the number of workers, so that a run's numbers do
    not depend on how the sweep was spread (a matrix product's rounding depends on its thread
    count); parallelism comes from the workers. ARCHSEP_THREADS overrides it (numbers may then
    differ in the last bits between settings)."""
    env = os.environ.get("ARCHSEP_THREADS", "").strip()
    if not env:
        return 1
    if not (env.isascii() and env.isdigit()) or not 1 <= int(env) <= MAX_THREADS:
        raise ArchsepError(f"ARCHSEP_THREADS: expected a positive integer up to {MAX_THREADS} (torch threads per "
                           f"run), got {env!r}; "
                           "set it to e.g. 1 or unset it")
    return int(env)


CHECKPOINT_S = 600.0


def checkpoint_every() -> float | None:
    """Seconds of a run's training between two saves of its state (`engine.checkpoint`):
    ARCHSEP_CHECKPOINT_S, 600 by default; 0 saves at every scheduled evaluation, "off" never."""
    env = os.environ.get("ARCHSEP_CHECKPOINT_S", "").strip()
    if not env:
        return CHECKPOINT_S
    if env == "off":
        return None
    try:
        every = float(env)
    except ValueError:
        every = -1.0
    if not 0 <= every < float("inf"):
        raise ArchsepError(f"ARCHSEP_CHECKPOINT_S: expected seconds >= 0 between a run's checkpoints, or off, "
                           f"got {env!r}; set it to e.g. 600 or unset it")
    return every


PARENT_POLL_S = 0.5


def watch_parent(parent: int) -> None:
    """In a worker: exit as soon as the driver that started it is gone (killed, even with
    SIGKILL), instead of training on for nobody. A daemon thread polls the parent pid."""
    import threading
    import time

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="archsep-watch-parent", daemon=True).start()


def init_worker(parent: int, plugins: list | None) -> None:
    """A pool worker's start: stop with the driver, import the driver's plugins."""
    watch_parent(parent)
    activate(plugins)


def probe(cfg_dicts: list[dict], plugins: list | None = None) -> str | None:
    """Build one run of each (task, arch) where the runs will train, on the meta device (no
    memory): a plugin the workers cannot import fails here, in seconds, as one line (None: fine)."""
    import torch

    try:
        activate(plugins)
        for d in cfg_dicts:  # one per (task, arch): `probe_configs`
            cfg = RunConfig.from_dict(d)
            spec = cfg.build_task().spec
            with torch.device("meta"):
                cfg.model_config().build(spec)
    except ArchsepError as e:
        return f"in a worker process ({socket.gethostname()}, pid {os.getpid()}): {e}"
    except Exception as e:  # noqa: BLE001
        return f"in a worker process ({socket.gethostname()}, pid {os.getpid()}): {type(e).__name__}: {e}"
    return None


def probe_configs(batches: list[list[RunConfig]]) -> list[dict]:
    seen: dict[tuple[str, str], dict] = {}
    for b in batches:
        for c in b:
            seen.setdefault((c.task, c.arch), c.to_dict())
    return list(seen.values())


def probe_failed(problem: str, workers: str) -> ArchsepError:
    """The fail-fast error of either executor: the worker's one line, and how plugins reach it."""
    return ArchsepError(f"{problem.splitlines()[0]} (plugins reach the {workers} from a file or module, not "
                        "__main__: --import, a sweep file's imports = [...], or an archsep.plugins entry point)")


def run_batch(cfg_dicts: list[dict], threads: int | None = None, plugins: list | None = None,
              checkpoints: Checkpoints | None = None) -> list[dict]:
    """Train one batch where this process is (a pool worker, a Ray worker or the driver) and
    return store rows. Never raises for a failing run. A run alone keeps its checkpoint in
    `checkpoints` (where the driver can reach it) and goes on from one saved there."""
    import torch

    from ..config import resolve_device
    from ..engine.train import train_many

    activate(plugins)
    cfgs = [RunConfig.from_dict(d) for d in cfg_dicts]
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    started = now()
    try:
        results = train_many(cfgs, checkpoints=checkpoints)
    finally:
        torch.set_num_threads(before)  # in the driver's own process (workers=1): leave it as it was
    rows = []
    for c, r in zip(cfgs, results):
        try:
            dev = str(resolve_device(c.train.device))
        except ArchsepError:
            dev = c.train.device
        rows.append(record(r, started_at=started, device=dev))
    return rows


def error_rows(batch: Sequence[RunConfig], message: str) -> list[dict]:
    """Rows for runs whose worker died: recorded as errors, so the sweep goes on."""
    return [record(RunResult(run_id=c.run_id, config=c.to_dict(), status="error", samples=None,
                             resolution=c.train.resolution, final_metric=None, best_metric=None,
                             error=message)) for c in batch]


class LocalExecutor:
    name = "local"

    def __init__(self, workers: int | None = None, checkpoints: Checkpoints | None = None):
        self.workers = workers or cores()
        self.threads = threads_for()
        self.checkpoints = checkpoints

    def describe(self) -> str:
        return f"local: {self.workers} worker(s) x {self.threads} thread(s)"

    def run(self, batches: list[list[RunConfig]]) -> Iterator[list[dict]]:
        if self.workers <= 1 or len(batches) <= 1:
            # in-process: no spawn cost for small sweeps
            for b in batches:
                yield run_batch([c.to_dict() for c in b], threads_for(), None, self.checkpoints)
            return
        import multiprocessing as mp

        todo = list(batches)
        restarts = 0
        while todo:
            ctx = mp.get_context("spawn")  # fork + torch threads can deadlock
            pool = ProcessPoolExecutor(min(self.workers, len(todo)), mp_context=ctx, initializer=init_worker,
                                       initargs=(os.getpid(), payload()))
            if restarts == 0:  # fail fast: a worker that cannot build the runs says so before they start
                try:
                    problem = pool.submit(probe, probe_configs(todo)).result()
                except BrokenProcessPool:
                    problem = "a worker process died while importing the plugins"
                if problem:
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise probe_failed(problem, "workers")
            futs = {pool.submit(run_batch, [c.to_dict() for c in b], self.threads, None, self.checkpoints): b
                    for b in todo}
            broken = finished_cleanly = False
            try:
                pending = set(futs)
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        b = futs[f]
                        try:
                            rows = f.result()
                        except BrokenProcessPool:
                            broken = True
                            continue
                        except Exception as e:  # noqa: BLE001 - a batch that crashed is recorded, not fatal
                            rows = error_rows(b, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")
                        todo.remove(b)
                        yield rows
                finished_cleanly = not broken
            finally:
                if not finished_cleanly:
                    # Ctrl-C, an error in the driver, or a dead worker: stop the workers now,
                    # do not wait for their batches (they are not stored and will be rerun)
                    for proc in list(getattr(pool, "_processes", {}).values()):
                        proc.terminate()
                pool.shutdown(wait=finished_cleanly, cancel_futures=True)
            if broken:
                restarts += 1
                if restarts > 2:  # a run that keeps killing its worker (out of memory?)
                    for b in todo:
                        yield error_rows(b, "worker process died (out of memory or killed) three times")
                    return


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, threads: int = 1,
                 checkpoints: Checkpoints | None = None):
        if address:
            _probe(address)  # before importing ray: a wrong address fails fast either way
        try:
            import ray
        except ImportError:
            raise ArchsepError.at("executor", "ray: Ray is not installed; pip install 'archsep[ray]'") from None
        self.ray = ray
        self.address = address
        self.threads = threads
        self.started_here = False
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no phoning home from a lab machine
        if not ray.is_initialized():
            kwargs: dict[str, Any] = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
            try:
                if address:
                    ray.init(address=address, **kwargs)
                else:
                    # "local": always a new cluster of our own, never attach to a running one
                    ray.init(address="local", num_cpus=workers or cores(), _node_ip_address="127.0.0.1", **kwargs)
                    self.started_here = True
            except (ConnectionError, TimeoutError, RuntimeError, ValueError) as e:
                raise ArchsepError.at("address", f"cannot connect to Ray at '{address or 'local'}': "
                                   f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
        # checkpoints only where the workers share the driver's disk: a cluster of our own on this machine
        self.checkpoints = checkpoints if self.started_here else None
        self.cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = workers or self.cpus

    def describe(self) -> str:
        where = self.address or "local cluster on 127.0.0.1"
        return f"ray ({where}): {self.cpus} CPU(s), {self.threads} thread(s) per task"

    def run(self, batches: list[list[RunConfig]]) -> Iterator[list[dict]]:
        ray = self.ray
        # a killed driver's tasks are stopped by Ray itself (tests/system/test_ray.py checks it)
        remote = ray.remote(num_cpus=self.threads, max_retries=1)(run_batch)
        plugins = ray.put(payload())
        problem = ray.get(ray.remote(num_cpus=self.threads)(probe).remote(probe_configs(batches), plugins))
        if problem:  # fail fast: a worker that cannot build the runs says so before they start
            raise probe_failed(problem, "Ray workers")
        todo = list(batches)
        inflight: dict = {}
        limit = max(2, 2 * self.workers)  # bounded queue: results stream back, memory stays flat
        try:
            while todo or inflight:
                while todo and len(inflight) < limit:
                    b = todo.pop(0)
                    inflight[remote.remote([c.to_dict() for c in b], self.threads, plugins, self.checkpoints)] = b
                done, _ = ray.wait(list(inflight), num_returns=1)
                for ref in done:
                    b = inflight.pop(ref)
                    try:
                        rows = ray.get(ref)
                    except Exception as e:  # noqa: BLE001 - a lost worker/node is recorded as an error
                        rows = error_rows(b, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                    yield rows
        finally:
            for ref in inflight:  # interrupted: free the cluster for others
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self.started_here:
            self.ray.shutdown()


def _probe(address: str) -> None:
    """Fail in seconds, with one line, when nothing listens at the address (ray.init itself
    retries for about a minute)."""
    if address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ArchsepError.at("address", f"expected HOST:PORT (or ray://HOST:PORT, or auto), got '{address}'")
    try:
        with socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S):
            pass
    except OSError as e:
        why = "timed out" if isinstance(e, socket.timeout) else (e.strerror or str(e))
        raise ArchsepError.at("address", f"cannot reach a Ray cluster at '{address}': {why}") from None


def check_executor(kind: str, address: str | None = None) -> None:
    """Everything about the executor that can fail, checked before anything is created."""
    if kind not in EXECUTORS:
        from ..errors import unknown

        raise unknown("executor", kind, EXECUTORS)
    if address and kind != "ray":
        raise ArchsepError.at("address", "only used with the Ray executor (executor ray)")
    if kind == "ray":
        import importlib.util

        if address:  # the address first: its error is the same with or without the extra
            _probe(address)
        if importlib.util.find_spec("ray") is None:
            raise ArchsepError.at("executor", "ray: Ray is not installed; pip install 'archsep[ray]'")


def make_executor(kind: str, workers: int | None = None, address: str | None = None,
                  checkpoints: Checkpoints | None = None):
    if kind not in EXECUTORS:
        from ..errors import unknown

        raise unknown("executor", kind, EXECUTORS)
    if kind == "local":
        if address:
            raise ArchsepError.at("address", "only used with the Ray executor (executor ray)")
        return LocalExecutor(workers, checkpoints)
    return RayExecutor(address, workers, checkpoints=checkpoints)

