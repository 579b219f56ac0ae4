"""A bounded on-disk queue of clip writes that could not reach Milvus (server down, network lost).

Each stored clip is one file (its rows, exactly as they would be written), named by a sequence
number and written atomically (temporary name, fsync, rename): a robot keeps perceiving while the
server is away, and the files are written to Milvus in order when it is back. Milvus writes are
upserts on deterministic primary keys, so a file written twice (e.g. the robot died between the
write and the file's removal) stores nothing twice.
"""

from __future__ import annotations

import json
import os

from m3_memory.errors import StoreError


class ClipSpool:
    """Files <seq>.json in a directory, oldest first; at most max_bytes in all."""

    def __init__(self, directory: str, max_bytes: int) -> None:
        self.directory = os.path.abspath(os.path.expanduser(directory))
        self.max_bytes = max_bytes

    def pending(self) -> list[str]:
        """Paths of the waiting writes, oldest first."""
        if not os.path.isdir(self.directory):
            return []
        names = sorted(n for n in os.listdir(self.directory) if n.endswith(".json") and n[:-5].isdigit())
        return [os.path.join(self.directory, n) for n in names]

    def size_bytes(self) -> int:
        return sum(os.path.getsize(path) for path in self.pending())

    def append(self, payload: dict, reason: str) -> str:
        """Queue one clip's writes; StoreError when the spool would exceed max_bytes (then the clip
        is not stored, and the caller reports it) or cannot be written."""
        data = json.dumps(payload, separators=(",", ":")).encode("utf-8")
        used = self.size_bytes()
        if used + len(data) > self.max_bytes:
            raise StoreError(
                f"Milvus is unreachable ({reason}) and the on-disk buffer {self.directory} is full "
                f"({used} + {len(data)} bytes > {self.max_bytes}): the clip is not stored; bring the server back "
                "or raise milvus_spool_max_mb"
            )
        pending = self.pending()
        seq = int(os.path.basename(pending[-1])[:-5]) + 1 if pending else 1
        path = os.path.join(self.directory, f"{seq:012d}.json")
        try:
            os.makedirs(self.directory, exist_ok=True)
            with open(path + ".tmp", "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(path + ".tmp", path)
        except OSError as error:
            raise StoreError(f"Milvus is unreachable ({reason}) and {path} cannot be written: {error}") from error
        return path

    @staticmethod
    def read(path: str) -> dict:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)

    @staticmethod
    def remove(path: str) -> None:
        os.remove(path)
