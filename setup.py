"""m3_agent: the bring-up package at the repository root (launch/, config/, the m3 command)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "m3_agent"

setup(
    name=PACKAGE,
    version="0.1.0",
    # Only the root package: src/ holds the other colcon packages.
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    package_data={PACKAGE: ["demo/*.yaml", "demo/episodes/*/*.yaml", "view/*.j2"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="m3-agent-ros maintainers",
    maintainer_email="maintainers@m3-agent-ros.org",
    description="Bring-up of m3-agent-ros and the m3 command line.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            # Installed twice: on PATH through env.sh, and under lib/m3_agent for `ros2 run`.
            "m3 = m3_agent.cli:main",
        ],
    },
)
