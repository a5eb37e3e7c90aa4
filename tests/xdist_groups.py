"""How ``python -m pytest`` shares the suite between its workers (pytest-xdist, ``-n``).

Every test module is one unit of work (as ``--dist loadfile``), but two groups of the end-to-end
modules against a real control plane, each one unit, run by one worker, so what they share is
made once, not once per worker:

* ``workload-crds``: the modules in ``tests/e2e/apiserver/`` that use the workload kinds' CRDs
  (the ``workload_crds`` fixture: 19 CRDs read and installed on the session's control plane);
* ``scheduling``: the scheduling plane's and the gang's (``test_plane_*.py``,
  ``test_apiserver_gang.py``), on a plane of their own.

The other modules there use the session's control plane (``plane``, which a worker starts in
seconds) or one of their own, and go to any worker. The two units are collected first and units
go out in collection order (not xdist's largest-count-first), so they start at once and the
other modules fill the workers around them.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

APISERVER = "tests/e2e/apiserver/"
SCHEDULING = ("test_plane_", "test_apiserver_gang.py")
FIRST = ("workload-crds", "scheduling")
ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _uses_workload_crds(path: str) -> bool:
    return "workload_crds" in (ROOT / path).read_text()


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or one of the two shared units."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(APISERVER):
        if path.removeprefix(APISERVER).startswith(SCHEDULING):
            return "scheduling"
        if _uses_workload_crds(path):
            return "workload-crds"
    return path


class ByUnit(LoadScopeScheduling):
    def __init__(self, config: Any, log: Any = None) -> None:
        config.option.loadscopereorder = False
        super().__init__(config, log)

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


def pytest_xdist_make_scheduler(config: Any, log: Any) -> ByUnit:
    return ByUnit(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The two shared units first (a stable sort: the order within each is kept)."""
    items.sort(key=lambda item: unit_of(item.nodeid) not in FIRST)
