from setuptools import find_packages, setup

PACKAGE = "m3_control"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["prompts/*.txt"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="m3-agent-ros maintainers",
    maintainer_email="maintainers@m3-agent-ros.org",
    description="Control node: the Instruct action, reasoning over memory in retrieval rounds to answer and plan.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "control_node = m3_control.control_node:main",
        ],
    },
)
