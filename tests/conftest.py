"""Shared fixtures. Broker fixtures live in tests/kafka_fixtures.py, registered here once so
that integration and fault tests share one session cluster (started only when a test asks)."""

from __future__ import annotations

import atexit
import faulthandler
import os
import socket
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.reaper import start_reaper, stop_reaper
from tests.scheduling import DurationLog, known_durations, longest_first

# Property tests: 200 generated inputs each in the default run (about 1.5 minutes of a
# 2-core machine less than 1,000), 10,000 in the thorough one (`make test-all`, or
# KAFEED_HYPOTHESIS=thorough).
settings.register_profile("default", max_examples=200)
settings.register_profile("thorough", max_examples=10_000)
settings.load_profile(os.environ.get("KAFEED_HYPOTHESIS", "default"))

pytest_plugins = ["tests.kafka_fixtures"]

# Four test processes share two cores, each training (in process, or in the `kafeed train`
# and DataLoader processes it starts) with torch's OpenMP pool, one thread per core by default.
# Those threads spin while they wait for one another, so with more threads than cores they
# burn CPU for nothing: the train, infer and README tests took 35 % less CPU and 30 % less
# time beside a CPU hog with one thread each. Set before torch is imported here, and inherited
# by every process a test starts; a value set outside is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Under pytest-xdist (`make test`) each of these runs whole in one process, with the others of
# its group: their fixture (a secured or three-node cluster, a task scenario, a sink forker,
# filled source topics) is expensive and module- or session-wide. Every other test is
# scheduled on its own.
WHOLE_IN_ONE_PROCESS = {
    "tests/integration/test_secure.py": "secure",
    "tests/integration/test_secure_train.py": "secure",
    # These two use the secured cluster too: on a worker of their own each started another
    # (certificates, SCRAM users and ACLs: 20-30 s of CPU a start).
    "tests/integration/test_secure_drain.py": "secure",
    "tests/integration/test_mirror_secure.py": "secure",
    "tests/integration/test_three_nodes.py": "three-nodes",
    "tests/integration/test_tasks.py": "tasks",
    "tests/integration/test_archive_faults.py": "archive-sinks",
    "tests/integration/test_loader_mixture.py": "mixture-sources",
    "tests/integration/test_mirror.py": "mirror-clusters",
    "tests/faults/test_matrix.py": "fault-matrix",
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class Grouped(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _scope_of(nodeid)

    return Grouped(config, log)


def _scope_of(nodeid: str) -> str:
    return WHOLE_IN_ONE_PROCESS.get(nodeid.split("::", 1)[0], nodeid)


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # longest first instead (tests/scheduling.py)
    config.pluginmanager.register(DurationLog(), "kafeed-durations")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    longest_first(items, _scope_of, known_durations(config))


def pytest_sessionfinish(session: pytest.Session) -> None:
    log = session.config.pluginmanager.get_plugin("kafeed-durations")
    if isinstance(log, DurationLog):
        log.store(session.config)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A test process still alive EXIT_GRACE_S after its main thread ended prints every
    thread's stack and exits: a client or thread a test left behind must fail the run loudly,
    not hang it.

    Armed when the interpreter starts to shut down (before it joins the threads left), not
    here: a pytest-xdist worker that is done waits in execnet until the slowest worker is done
    too, minutes at times, and must not be ended for that.
    """
    arm = partial(faulthandler.dump_traceback_later, EXIT_GRACE_S, exit=True)
    register = getattr(threading, "_register_atexit", None)  # runs before the threads are joined
    if register is not None:
        register(arm)
    else:
        atexit.register(arm)


EXIT_GRACE_S = 120

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def _reaper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Brokers and CLIs under this session's temporary directory end with it (tests/reaper.py)."""
    reaper = start_reaper(tmp_path_factory.getbasetemp())
    yield
    stop_reaper(reaper)


@pytest.fixture(scope="session")
def shakespeare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tiny Shakespeare: the team's shared copy, else the one bundled in the package."""
    path = SHARED_DATA / "tinyshakespeare.txt"
    if path.exists():
        return path
    from kafeed.demo import bundled_corpus

    return bundled_corpus(tmp_path_factory.mktemp("corpus") / "tinyshakespeare.txt")


@pytest.fixture
def nowhere() -> Iterator[str]:
    """An address nothing answers on: a port held bound but never listened on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local webhook receiver: its URL and the JSON bodies it has received."""
    from tests.webhook import webhook_server

    with webhook_server("/alerts") as server:
        yield server
