"""What the run ran on: the device, the versions that matter, whether the project's declared dependency
ranges allow them (the GPU machine's torch, transformers and sentence-transformers are not the ones CI
installs), and nvidia-smi's report.

    python benchmarks/gpu/environment.py --device cuda --json OUT/environment.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from importlib import metadata

from packaging.requirements import Requirement

PACKAGES = ("torch", "transformers", "sentence-transformers", "numpy", "nnsight", "triton")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", required=True)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    import torch

    versions = {"python": platform.python_version(), "cuda (torch built with)": str(torch.version.cuda)}
    versions.update({name: metadata.version(name) for name in PACKAGES if _installed(name)})
    ranges, allowed = [], True
    for line in metadata.requires("mteb-fairpos") or ():
        requirement = Requirement(line)
        if requirement.marker is None and requirement.name in versions:
            ok = requirement.specifier.contains(versions[requirement.name], prereleases=True)
            allowed &= ok
            ranges.append(f"{requirement}: {versions[requirement.name]} {'allowed' if ok else 'NOT allowed'}")
    device = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else platform.processor() or "cpu"
    try:
        smi = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as err:
        smi = f"nvidia-smi: {err}"
    report = {"device": device, "versions": versions, "ranges": ranges, "nvidia_smi": smi}
    with open(args.json, "w") as handle:
        json.dump(report, handle, indent=1)
    print(smi)
    print(f"device: {device}")
    print("\n".join(f"{name} {version}" for name, version in versions.items()))
    print("\n".join(ranges))
    return 0 if allowed else 1


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
