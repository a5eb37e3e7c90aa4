"""Being the top-level conftest, this file puts ``tests/`` on ``sys.path`` (pytest's default
``prepend`` import mode), so ``tests/e2e`` can ``import helpers`` as the unit tests do."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakeapi import FakeAPI

# The tests mirror the packages (tests/jq/, tests/server/, ...); a test module may import
# another's constants by its name, wherever it lives.
for _d in sorted(Path(__file__).resolve().parent.iterdir()):
    if _d.is_dir() and any(_d.glob("test_*.py")) and str(_d) not in sys.path:
        sys.path.append(str(_d))


@pytest.fixture
def fake() -> Iterator[FakeAPI]:
    f = FakeAPI()
    yield f
    f.close()
