"""Fixtures every kind of test may ask for, and two guards every test runs under."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Iterator

import pytest
import structlog
from hypothesis import HealthCheck, settings

# The whole suite runs as one process on a loaded 2-core machine: a property's example that
# takes 250 ms because another process had the CPU is not a failure. Hypothesis's deadline
# (200 ms an example by default) and its too-slow health check measure the machine, not the
# code, so neither is applied; how many examples each property runs is left as it is.
settings.register_profile(
    "loaded-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("loaded-machine")


@pytest.fixture
def logging_left_as_it_was() -> Iterator[None]:
    """A command that gets as far as configuring the logs must not leave them pointing at this
    test's captured output: a later test's log line would write to a closed file."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


# ---- no task outlives its module ----------------------------------------------------------
# Every test and fixture runs on one event loop for the whole session (pyproject:
# asyncio_default_*_loop_scope = "session"), so a task a test starts and never stops (a
# watch that wakes every 15 s, a reader looping forever) keeps running through the tests
# after it: it logs into their captured output, takes their CPU, holds their connections,
# and fails one of them by chance minutes later. A task started in a module and still
# running once the module's own fixtures are torn down fails the module's last test here,
# named with the test it was started in, and is cancelled, so the tests after it run as
# they would alone.

_STARTED_IN: weakref.WeakKeyDictionary[asyncio.Task[object], str] = weakref.WeakKeyDictionary()


_LOOP: list[asyncio.AbstractEventLoop] = []
"""the session's event loop, once a module's guard has run on it"""


@pytest.fixture(autouse=True)
def _tasks_a_test_leaves(request: pytest.FixtureRequest) -> Iterator[None]:
    """Note the test in which each task still running after it was started (a plain
    fixture: an async one on every test cost the suite about 5 ms a test)."""
    if not _LOOP:
        yield
        return
    before = asyncio.all_tasks(_LOOP[0])
    yield
    for task in asyncio.all_tasks(_LOOP[0]) - before:
        if not task.done():
            _STARTED_IN.setdefault(task, request.node.nodeid)


@pytest.fixture(scope="module", autouse=True)
async def _no_task_outlives_its_module(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    _LOOP[:] = [asyncio.get_running_loop()]
    before = asyncio.all_tasks()
    yield
    for _ in range(5):  # tasks cancelled during the teardowns finish their cancellation
        await asyncio.sleep(0)
    this = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() - before if t is not this and not t.done()]
    if left:  # a task that was told to stop and ends at its next wake-up, soon: let it
        # (3 s: a connection's reader closing on a loaded machine outlived 1 s once in a
        # fresh-clone run, test_projection_split; one that never ends still fails here)
        await asyncio.wait(left, timeout=3.0)
        left = [task for task in left if not task.done()]
    if not left:
        return
    found = [
        f"{_coroutine_name(task)} ({_where(task)}), started in "
        f"{_STARTED_IN.get(task, 'a fixture of ' + request.node.nodeid)}"
        for task in left
    ]
    for task in left:
        task.cancel()
    await asyncio.wait(left, timeout=10)
    pytest.fail(
        "tasks left running on the session's event loop after the module: "
        + "; ".join(sorted(found)),
        pytrace=False,
    )


def _coroutine_name(task: asyncio.Task[object]) -> str:
    coro = task.get_coro()
    return getattr(coro, "__qualname__", None) or repr(coro)


def _where(task: asyncio.Task[object]) -> str:
    stack = task.get_stack()
    if not stack:
        return "not started"
    frame = stack[0]  # the task's own coroutine, at the line it waits on
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"
