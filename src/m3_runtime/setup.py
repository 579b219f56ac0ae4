from setuptools import find_packages, setup

PACKAGE = "m3_runtime"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="m3-agent-ros maintainers",
    maintainer_email="maintainers@m3-agent-ros.org",
    description="The node runtime every m3 node shares: lifecycle and bring-up, stopping in order, parameter checks, stamp guards, image and audio codecs, state files, tied child processes.",
    license="Apache-2.0",
)
