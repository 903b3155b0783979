"""Build hooks that ship ``mteb_fairpos_hook.pth`` next to the package (see _mteb_fairpos_hook.py).

mteb has no plugin API; this ``.pth`` file arms a tiny import hook at interpreter start-up that
registers the plugin with mteb once mteb is imported. setuptools cannot place a file at the top of
site-packages by configuration alone, so regular wheels get it from ``build_py`` and editable
installs (PEP 660) from a wrapper around the editable strategy. Everything else is configured in
pyproject.toml.
"""

from __future__ import annotations

import os

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py

PTH = "mteb_fairpos_hook.pth"
HERE = os.path.dirname(os.path.abspath(__file__))


def _pth_bytes() -> bytes:
    with open(os.path.join(HERE, PTH), "rb") as handle:
        return handle.read()


class build_py(_build_py):
    """Also put the .pth file at the root of the build (it lands in site-packages)."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if not self.editable_mode:
            outputs.append(os.path.join(self.build_lib, PTH))
        return outputs


cmdclass: dict[str, type] = {"build_py": build_py}

try:
    from setuptools.command.editable_wheel import editable_wheel as _editable_wheel
except ImportError:  # setuptools without PEP 660 support: no editable hook
    _editable_wheel = None

if _editable_wheel is not None:

    class _WithHookPth:
        """Wraps setuptools' editable strategy and adds the hook's .pth file to the editable wheel."""

        def __init__(self, strategy) -> None:
            self.strategy = strategy

        def __call__(self, wheel, files, mapping):
            result = self.strategy(wheel, files, mapping)
            wheel.writestr(PTH, _pth_bytes())
            return result

        def __enter__(self):
            self.strategy.__enter__()
            return self

        def __exit__(self, *exc):
            return self.strategy.__exit__(*exc)

    class editable_wheel(_editable_wheel):
        def _select_strategy(self, *args, **kwargs):
            return _WithHookPth(super()._select_strategy(*args, **kwargs))

    cmdclass["editable_wheel"] = editable_wheel

setup(cmdclass=cmdclass)
