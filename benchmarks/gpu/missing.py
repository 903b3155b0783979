"""Print ``name==version`` for every package the named ones need (themselves included, transitively) that
the GPU machine lacks, at the version installed here.

Resolving afresh for Python 3.12 would take pip minutes of downloads; the versions installed here
already work together with this checkout, and run.sh's install there checks them against what the
machine has (it fails naming any conflict).
"""

from __future__ import annotations

import re
import sys
from importlib import metadata

from packaging.requirements import Requirement

TARGET = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
          "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
          "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
"""The GPU machine's interpreter, for the requirements' environment markers."""


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def missing(roots: list[str], present: set[str]) -> dict[str, str]:
    needed = {canonical(name): metadata.version(name) for name in roots if canonical(name) not in present}
    queue = list(needed)
    while queue:
        for line in metadata.requires(queue.pop()) or ():
            requirement = Requirement(line)
            name = canonical(requirement.name)
            if requirement.marker is not None and not requirement.marker.evaluate(TARGET):
                continue  # an extra, or another platform's
            if name in present or name in needed:
                continue
            needed[name] = metadata.version(name)
            queue.append(name)
    return needed


def main(machine: str, *roots: str) -> None:
    with open(machine) as handle:
        present = {canonical(line.split("==")[0].strip()) for line in handle if line.strip() and not line.startswith("#")}
    for name, version in sorted(missing(list(roots), present).items()):
        print(f"{name}=={version}")


if __name__ == "__main__":
    main(*sys.argv[1:])
