"""Being the top-level conftest, this file puts ``tests/`` on ``sys.path`` (pytest's default
``prepend`` import mode), so ``tests/e2e`` can ``import helpers`` as the unit tests do; and it
loads ``xdist_groups`` (how the workers share the suite) when pytest-xdist is installed."""

import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeapi import FakeAPI

from webhook.jq import sandbox

# The tests mirror the packages (tests/jq/, tests/server/, ...); a test module may import
# another's constants by its name, wherever it lives.
for _d in sorted(Path(__file__).resolve().parent.iterdir()):
    if _d.is_dir() and any(_d.glob("test_*.py")) and str(_d) not in sys.path:
        sys.path.append(str(_d))


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):  # not under pytest -p no:xdist
        import xdist_groups

        config.pluginmanager.register(xdist_groups)


@pytest.fixture
def fake() -> Iterator[FakeAPI]:
    f = FakeAPI()
    yield f
    f.close()


# Every jq sandbox pool a test module makes (an Engine per test, per parametrized case, ...) is
# closed when the module ends: its children are processes the tests started, so the tests end
# them, rather than leaving dozens alive until pytest exits.
_POOLS: "weakref.WeakSet[sandbox.Sandbox]" = weakref.WeakSet()
_pool_init = sandbox.Sandbox.__init__


def _tracked_init(self: sandbox.Sandbox, *args: object, **kwargs: object) -> None:
    _pool_init(self, *args, **kwargs)  # type: ignore[arg-type]
    _POOLS.add(self)


sandbox.Sandbox.__init__ = _tracked_init  # type: ignore[method-assign]


@pytest.fixture(autouse=True, scope="module")
def _close_sandbox_pools() -> Iterator[None]:
    yield
    for pool in list(_POOLS):
        pool.close()
