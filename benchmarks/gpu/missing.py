"""Print ``name==version`` for every package the named ones need (themselves included, transitively) that
the GPU machine lacks or may hold at a version outside what is asked of it, at the version installed here.

A package pinned in machine.txt is brought when its version there falls outside the range this
project (for a named one) or a brought package (for a dependency) asks for; one present there at an
unrecorded version is brought when a range is asked of it, since nothing says the machine's fits.

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


def fits(requirement: Requirement, present: dict[str, str | None]) -> bool:
    """Whether the machine's copy is known to satisfy ``requirement``."""
    name = canonical(requirement.name)
    if name not in present:
        return False
    version = present[name]
    if version is None:
        return not requirement.specifier  # unrecorded there: only an unranged requirement is surely met
    return requirement.specifier.contains(version, prereleases=True)


def applies(requirement: Requirement) -> bool:
    return requirement.marker is None or requirement.marker.evaluate(TARGET)  # not an extra, not another platform's


def missing(roots: list[str], present: dict[str, str | None]) -> dict[str, str]:
    asked = {canonical(r.name): r for r in map(Requirement, metadata.requires("mteb-fairpos") or ()) if applies(r)}
    needed = {}
    for root in roots:
        requirement = asked.get(canonical(root), Requirement(root))
        if not fits(requirement, present):
            needed[canonical(root)] = metadata.version(root)
    queue = list(needed)
    while queue:
        for line in metadata.requires(queue.pop()) or ():
            requirement = Requirement(line)
            name = canonical(requirement.name)
            if not applies(requirement) or name in needed or fits(requirement, present):
                continue
            needed[name] = metadata.version(name)
            queue.append(name)
    return needed


def main(machine: str, *roots: str) -> None:
    present: dict[str, str | None] = {}
    with open(machine) as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                name, _, version = line.strip().partition("==")
                present[canonical(name)] = version or None
    for name, version in sorted(missing(list(roots), present).items()):
        print(f"{name}=={version}")


if __name__ == "__main__":
    main(*sys.argv[1:])
