from setuptools import find_packages, setup

PACKAGE = "m3_memory"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["memorize/prompts/*.txt"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="m3-agent-ros maintainers",
    maintainer_email="maintainers@m3-agent-ros.org",
    description="Memory node: a durable, entity-centric multimodal memory graph served through search_node / search_clip.",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "memory_node = m3_memory.memory_node:main",
        ],
    },
)
