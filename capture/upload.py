"""Files for a run, packed as one tar stream so a single SSH call uploads them all."""

from __future__ import annotations

import io
import tarfile
import time


def files_tar(files: dict[str, str]) -> bytes:
    """A tar archive of `{relative path: text}`; run.sh is executable."""
    buf = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = int(now)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
