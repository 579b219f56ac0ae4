"""Point the CMake exports of the ROS 2 PyPI wheels at this interpreter.

The message wheels were built on a manylinux image; their exported targets name that image's
Python and numpy include directories, and CMake refuses targets with non-existent include paths.
"""

import pathlib
import re
import sys
import sysconfig

import numpy

BUILD_PYTHON_INCLUDE = re.compile(r"/opt/python/cp3\d+-cp3\d+/include/python3\.\d+")
BUILD_NUMPY_INCLUDE = re.compile(r"/opt/python/cp3\d+-cp3\d+/lib/python3\.\d+/site-packages/numpy/_?core/include")


def main(venv: str) -> int:
    changed = 0
    for cmake_file in pathlib.Path(venv, "share").glob("*/cmake/*.cmake"):
        text = cmake_file.read_text()
        fixed = BUILD_PYTHON_INCLUDE.sub(sysconfig.get_paths()["include"], text)
        fixed = BUILD_NUMPY_INCLUDE.sub(numpy.get_include(), fixed)
        if fixed != text:
            cmake_file.write_text(fixed)
            changed += 1
    print(f"fix_cmake_exports: rewrote {changed} CMake export files under {venv}/share")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
