"""Being the top-level conftest, this file puts ``tests/`` on ``sys.path`` (pytest's default
``prepend`` import mode), so ``tests/e2e`` can ``import helpers`` as the unit tests do."""
