"""An Arrow C stream counted batch by batch while polars reads it, and stoppable between batches.

ADBC hands a query's result over as an Arrow C stream (`__arrow_c_stream__`) and polars reads
it whole in one call, so nothing of the project runs until the last row is in. `Watched`
stands between the two: it takes the producer's stream over and gives polars one of its own
whose `get_next` fetches the producer's next batch, adds its rows to a count and calls
`on_rows(rows_so_far)`. Whatever `on_rows` raises (a cancelled load) ends the stream with an
error; `Watched.error` holds it for the caller to raise once polars has returned. Nothing but
the stream's own structures is touched (the Arrow C stream interface, no pyarrow), and the
producer's data is never copied.
"""

from __future__ import annotations

import ctypes
import errno
from collections.abc import Callable
from typing import Any

_CAPSULE_NAME = b"arrow_array_stream"  # lives as long as the module: capsules keep the pointer

# Typed pointers of our own to the two C-API calls (the shared `ctypes.pythonapi` entries are
# left as other code may have typed them).
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)
_new_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi)
)


class _Stream(ctypes.Structure):
    """struct ArrowArrayStream; the callbacks as plain pointers, cast when called."""

    _fields_ = [
        ("get_schema", ctypes.c_void_p),
        ("get_next", ctypes.c_void_p),
        ("get_last_error", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


class _Array(ctypes.Structure):
    """struct ArrowArray: only `length` and `release` are read."""

    _fields_ = [
        ("length", ctypes.c_int64),
        ("null_count", ctypes.c_int64),
        ("offset", ctypes.c_int64),
        ("n_buffers", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("buffers", ctypes.c_void_p),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


_GET_SCHEMA = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_GET_NEXT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_GET_LAST_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_RELEASE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

_STOPPED = ctypes.create_string_buffer(b"the read was stopped between two batches")


class Watched:
    """`source`'s Arrow C stream, passed on to whoever reads this object's stream.

    `source` is anything with `__arrow_c_stream__` (ADBC's result handle); it is taken over
    at once (its own stream is left released). Read the rows with `pl.DataFrame(watched)`;
    when that raises, raise `watched.error` instead if it is set. `rows` counts the rows
    read so far.
    """

    def __init__(self, source: Any, on_rows: Callable[[int], None]) -> None:
        capsule = source.__arrow_c_stream__()
        address = _capsule_pointer(capsule, _CAPSULE_NAME)
        self._inner = _Stream()
        ctypes.memmove(ctypes.addressof(self._inner), address, ctypes.sizeof(_Stream))
        _Stream.from_address(address).release = None  # moved: the capsule no longer owns it
        self._on_rows = on_rows
        self.rows = 0
        self.error: BaseException | None = None
        # The callbacks must live as long as any copy of the stream can call them.
        self._callbacks = (
            _GET_SCHEMA(self._get_schema),
            _GET_NEXT(self._get_next),
            _GET_LAST_ERROR(self._get_last_error),
            _RELEASE(self._release),
        )
        self._outer = _Stream(*(ctypes.cast(cb, ctypes.c_void_p) for cb in self._callbacks), None)

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        return _new_capsule(ctypes.addressof(self._outer), _CAPSULE_NAME, None)

    def close(self) -> None:
        """Release the producer's stream if the reader never did (an error before reading)."""
        self._release(None)

    # -- the stream callbacks (called by the reader, possibly from its own thread)

    def _inner_address(self) -> int:
        return ctypes.addressof(self._inner)

    def _get_schema(self, _stream: int, out: int) -> int:
        if not self._inner.get_schema:
            return errno.EINVAL
        return int(_GET_SCHEMA(self._inner.get_schema)(self._inner_address(), out))

    def _get_next(self, _stream: int, out: int) -> int:
        if self.error is not None or not self._inner.get_next:
            return errno.ECANCELED
        code = int(_GET_NEXT(self._inner.get_next)(self._inner_address(), out))
        if code:
            return code
        batch = _Array.from_address(out)
        if not batch.release:  # the end of the stream
            return 0
        self.rows += batch.length
        try:
            self._on_rows(self.rows)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through `error`
            self.error = exc
            _RELEASE(batch.release)(out)
            batch.release = None
            return errno.ECANCELED
        return 0

    def _get_last_error(self, _stream: int) -> int | None:
        if self.error is not None:
            return ctypes.addressof(_STOPPED)
        if not self._inner.get_last_error:
            return None
        message: int | None = _GET_LAST_ERROR(self._inner.get_last_error)(self._inner_address())
        return message

    def _release(self, stream: int | None) -> None:
        if self._inner.release:
            _RELEASE(self._inner.release)(self._inner_address())
            self._inner.release = None  # the producer does it too; never twice either way
        if stream:
            _Stream.from_address(stream).release = None
