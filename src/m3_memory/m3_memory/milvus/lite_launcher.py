"""Runs `milvus-lite server` with its index files written whole or not at all (run by the server's
own interpreter, in its virtualenv: this file imports nothing of m3).

milvus-lite 3.2.2 keeps each segment's vector and scalar indexes in sidecar files (`indexes/*.idx`,
`*.sidx`) that it writes in place (`open(path, "wb")`). A server killed while writing one leaves it cut
short, and on restart every `load_collection` of that collection fails for ever ("No data left in
file", numpy's EOFError; seen in `m3 bench fleet` with a SIGKILL mid-flush), although the segment data
is intact. An index is derived data, so two small changes to `Segment` make a crash harmless:
- a sidecar is built in a staging folder beside it and renamed into place (`os.replace`, atomic; two
  threads building one at once, as a flush and a load can, no longer write the same file either);
- a sidecar that does not load is removed and built again from the segment, with a warning.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import sys
import tempfile

STAGING_PREFIX = ".m3-staging-"
log = logging.getLogger("m3_milvus_lite")


def _whole_sidecars(original, scalar: bool):
    """Wrap Segment.build_or_load_index / build_or_load_scalar_index (spec, index_dir[, dtype])."""

    def build_or_load(segment, spec, index_dir: str, *args):
        attached = segment.scalar_indexes if scalar else segment.indexes
        if spec.field_name in attached or segment.num_rows == 0:  # nothing to load or build
            return original(segment, spec, index_dir, *args)
        path = segment.index_file_path(index_dir, spec.index_type, spec.field_name, scalar=scalar)
        if os.path.exists(path):
            try:
                return original(segment, spec, index_dir, *args)
            except Exception as error:  # noqa: BLE001 - any unreadable sidecar: it is rebuilt from the segment
                log.warning("index file %s does not load (%s: %s); building it again", path, type(error).__name__,
                            error)  # fmt: skip
                os.remove(path)
        os.makedirs(index_dir, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=index_dir)
        try:
            result = original(segment, spec, staging, *args)
            staged = segment.index_file_path(staging, spec.index_type, spec.field_name, scalar=scalar)
            if os.path.exists(staged):
                os.replace(staged, path)
            return result
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    return build_or_load


def patch() -> None:
    from milvus_lite.storage.segment import Segment

    Segment.build_or_load_index = _whole_sidecars(Segment.build_or_load_index, scalar=False)
    Segment.build_or_load_scalar_index = _whole_sidecars(Segment.build_or_load_scalar_index, scalar=True)


def sweep_staging(data_dir: str) -> None:
    """Remove staging folders a killed server left (their files were never renamed into place)."""
    for folder in glob.glob(os.path.join(glob.escape(data_dir), "**", STAGING_PREFIX + "*"), recursive=True):
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str]) -> int:
    """argv: milvus-lite's own arguments (`server --data-dir DIR ...`)."""
    from milvus_lite.cmdline import main as milvus_lite_main

    if "--data-dir" in argv[:-1]:
        sweep_staging(argv[argv.index("--data-dir") + 1])
    patch()
    return milvus_lite_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
