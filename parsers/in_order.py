"""Work on a stream of pieces in threads, results handed back in the pieces' order.

The CSV and timeline readers parse a big file piece by piece; polars releases the GIL while
it parses, so a second piece in flight uses the second core while the caller handles the
results of the first in order (progress, cancel checks, concatenation).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

K = TypeVar("K")
A = TypeVar("A")
R = TypeVar("R")


def in_order(work: Callable[[A], R], items: Iterable[tuple[K, A]], *, at_once: int, name: str) -> Iterator[tuple[K, R]]:
    """(key, work(arg)) for each (key, arg) of `items`, in their order, with up to `at_once`
    calls running in threads named `name`.

    Only the keys are held until their result is handed back, not the arguments (a piece's
    bytes go with its call). The next item is taken while the oldest call runs. Stopping
    early (the caller leaves the loop, or `work` raises) drops the calls not started; one
    already running finishes on its own.
    """
    pending: deque[tuple[K, Future[R]]] = deque()
    pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix=name)
    try:
        for key, arg in items:
            pending.append((key, pool.submit(work, arg)))
            del arg
            if len(pending) == at_once:
                done, future = pending.popleft()
                yield done, future.result()
        while pending:
            done, future = pending.popleft()
            yield done, future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
