"""What a worker gives back to the system after a large request: glibc's ``malloc`` serves a
request of more than ``M_MMAP_THRESHOLD`` bytes with its own ``mmap`` and returns it on free,
but by default it raises that threshold to the largest block freed so far (up to 32 MiB), so
after one 1 MB key or 3 MiB body every later one comes from a thread's arena and stays there:
measured, two workers went from 43/39 MiB to 152/147 MiB after 30 hostile requests on their
four threads, past the 128 MiB a worker is counted at. :func:`fix_mmap_threshold` sets the
threshold to :data:`MMAP_THRESHOLD` for good (a value set by ``mallopt`` is never raised), as
``MALLOC_MMAP_THRESHOLD_`` would: the same load then leaves 71/69 MiB
(``bench/bench_worker_memory.py``). On a C library without ``mallopt`` (musl) nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util

#: glibc's ``M_MMAP_THRESHOLD`` parameter of ``mallopt``
_M_MMAP_THRESHOLD = -3
#: blocks of at least this many bytes are mapped on their own and unmapped when freed
#: (glibc's own default before it adjusts it)
MMAP_THRESHOLD = 128 * 1024


def fix_mmap_threshold(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix ``malloc``'s mmap threshold at ``threshold`` bytes in this process (and the
    processes it forks); whether the C library took it."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
