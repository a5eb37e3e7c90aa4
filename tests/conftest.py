"""Being the top-level conftest, this file puts ``tests/`` on ``sys.path`` (pytest's default
``prepend`` import mode), so ``tests/e2e`` can ``import helpers`` as the unit tests do."""

from collections.abc import Iterator

import pytest
from fakeapi import FakeAPI


@pytest.fixture
def fake() -> Iterator[FakeAPI]:
    f = FakeAPI()
    yield f
    f.close()
