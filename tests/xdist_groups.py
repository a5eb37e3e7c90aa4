"""How ``python -m pytest`` shares the suite between its workers (pytest-xdist, ``-n``).

Every test module is one unit of work (as ``--dist loadfile``), except the end-to-end tests
against a real control plane: ``tests/e2e/apiserver/`` is two units, each run by one worker,
so a session's control plane and the workload kinds' CRDs are made once, not once per worker:

* ``apiserver``: the modules on the shared control plane (``plane``, ``workload_crds``) and the
  ones that start a fresh one;
* ``scheduling``: the scheduling plane's and the gang's (``test_plane_*.py``,
  ``test_apiserver_gang.py``), on planes of their own.

The two long units are collected first and units go out in collection order (not xdist's
largest-count-first), so they start at once and the other modules fill the workers around them.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

APISERVER = "tests/e2e/apiserver/"
SCHEDULING = ("test_plane_", "test_apiserver_gang.py")


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or one of the two control-plane units."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(APISERVER):
        name = path.removeprefix(APISERVER)
        return "scheduling" if name.startswith(SCHEDULING) else "apiserver"
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
    """The control-plane units first (a stable sort: the order within each is kept)."""
    first = ("apiserver", "scheduling")
    items.sort(key=lambda item: unit_of(item.nodeid) not in first)
