"""The test-fixture interface packages (test/fixtures/interfaces: audio_common_msgs, hri_msgs,
vision_msgs) built with colcon into a cache keyed by their content, and the environment that makes them
importable.

Why a separate prefix under ~/.cache/m3-agent and not install/: they stand in for third-party
packages a user installs; the project never ships or builds them. Why subprocesses: the generated
C type support is found through LD_LIBRARY_PATH, which a running process does not re-read, so the
nodes and the test's peer that use these types run in processes started with `fixture_env()`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "interfaces"
PACKAGES = ("audio_common_msgs", "hri_msgs", "vision_msgs")


def _cache_root() -> Path:
    return Path(os.environ.get("M3_CACHE_DIR", Path.home() / ".cache" / "m3-agent")) / "test-interfaces"


def _content_key() -> str:
    """Hash of every fixture file and of the toolchain (this interpreter's venv and its requirement stamp)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in FIXTURES.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(FIXTURES)).encode() + b"\0" + path.read_bytes() + b"\0")
    stamp = Path(sys.prefix) / ".m3-requirements"
    digest.update(sys.prefix.encode() + (stamp.read_bytes() if stamp.exists() else b""))
    return digest.hexdigest()[:16]


def build_fixture_interfaces() -> tuple[Path, float]:
    """The install prefix holding the packages (merged install) and the seconds this call spent
    building (0.0 when cached). Concurrent callers wait on a lock; a failed build raises with the log."""
    root = _cache_root() / _content_key()
    prefix = root / "install"
    done = prefix / ".m3-complete"
    if done.exists():
        return prefix, 0.0
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return prefix, 0.0
        shutil.rmtree(root, ignore_errors=True)  # a build interrupted earlier
        root.mkdir(parents=True)
        venv = Path(sys.prefix)
        env = dict(os.environ, CMAKE_PREFIX_PATH=str(venv), AMENT_PREFIX_PATH=str(venv))
        env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
        command = [
            str(venv / "bin" / "colcon"), "--log-base", str(root / "log"), "build", "--merge-install",
            "--base-paths", str(FIXTURES), "--build-base", str(root / "build"), "--install-base", str(prefix),
            "--packages-select", *PACKAGES, "--event-handlers", "console_direct-", "status-",
            "--cmake-args", f"-DPython3_EXECUTABLE={sys.executable}", "-DBUILD_TESTING=OFF",
        ]  # fmt: skip
        start = time.monotonic()
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if result.returncode != 0:
            raise RuntimeError(
                f"building the fixture interfaces failed (logs in {root / 'log'}):\n{result.stdout[-4000:]}"
                f"\n{result.stderr[-4000:]}"
            )
        shutil.rmtree(root / "build", ignore_errors=True)  # only the install prefix is used
        done.write_text(str(round(time.monotonic() - start, 1)))
        return prefix, time.monotonic() - start


def fixture_env(prefix: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with the fixture prefix on every search path."""
    env = dict(os.environ if base is None else base)
    site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    for name, entry in (("AMENT_PREFIX_PATH", prefix), ("PYTHONPATH", site), ("LD_LIBRARY_PATH", prefix / "lib")):
        env[name] = f"{entry}:{env[name]}" if env.get(name) else str(entry)
    return env
