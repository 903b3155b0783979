"""Registers mteb-fairpos with mteb right after mteb is imported.

Loaded at interpreter start-up by ``mteb_fairpos_hook.pth`` (installed into site-packages with the
package). It only puts a small finder at the front of ``sys.meta_path`` that waits for the
top-level ``mteb`` import; nothing else is imported, so Python processes that never import mteb
pay only for reading this file. When mteb has finished importing, the finder calls
``mteb_fairpos.mteb_plugin.register()``. Set ``MTEB_FAIRPOS_DISABLE=1`` to turn this off.

When it is an mteb_fairpos module that imports mteb (e.g. ``import mteb_fairpos.tasks`` before
``import mteb``), registering at once would read half-executed modules; registration then waits
until the import system marks the last of them done. The deferral is this file's alone: plugin
modules know nothing of it. A failure to register never breaks ``import mteb``: it is a warning.

The two CPython import-system details this relies on sit behind one function each,
`_is_initialising` and `_when_done`, which ``tests/test_mteb_plugin.py`` checks against the running
Python, so a release that changes them fails a test instead of silently registering too early.
"""

import sys

_DISABLE = "MTEB_FAIRPOS_DISABLE"
_PACKAGE = "mteb_fairpos"
_state = {"registered": False, "pending": False}


class _MtebImportHook:
    """Meta-path finder that wraps the loader of the top-level ``mteb`` package, once."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "mteb" or path is not None:
            return None
        _remove(cls)
        from importlib.util import find_spec

        spec = find_spec("mteb")  # the real spec, from the remaining finders
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            loader.__dict__.pop("exec_module", None)
            _after_mteb_import()

        loader.exec_module = exec_module
        return spec

    @classmethod
    def invalidate_caches(cls):
        pass


def _remove(finder):
    try:
        sys.meta_path.remove(finder)
    except ValueError:
        pass


def _disabled():
    import os

    return os.environ.get(_DISABLE, "").strip().lower() in ("1", "true", "yes")


def _is_initialising(module):
    """Whether ``module`` is still executing its body (CPython marks ``spec._initializing``)."""
    spec = getattr(module, "__spec__", None)
    return spec is not None and bool(getattr(spec, "_initializing", False))


def _when_done(module, callback):
    """Call ``callback()`` once the import system marks ``module`` done; False if it cannot watch.

    CPython clears ``spec._initializing`` by attribute assignment when a module's body has run;
    a subclass of the spec's class, swapped in, sees that assignment.
    """
    spec = module.__spec__
    base = type(spec)
    if base.__name__ == "_DoneWatchingSpec":
        return True

    class _DoneWatchingSpec(base):
        def __setattr__(self, name, value):
            base.__setattr__(self, name, value)
            if name == "_initializing" and not value:
                object.__setattr__(self, "__class__", base)
                callback()

    try:
        spec.__class__ = _DoneWatchingSpec
    except TypeError:
        return False
    return True


def _initialising_fairpos_modules():
    """mteb_fairpos modules still executing their body."""
    return [module for name, module in list(sys.modules.items())
            if (name == _PACKAGE or name.startswith(_PACKAGE + ".")) and _is_initialising(module)]


def _after_mteb_import():
    if _disabled() or _state["registered"]:
        return
    busy = _initialising_fairpos_modules()
    if not busy:
        register_now()
        return
    # mteb was imported by an mteb_fairpos module that is still executing: registering now would
    # read half-initialised modules (e.g. a partly filled TASKS). The import system sets
    # ``spec._initializing = False`` when a module is done; watch that on each of them.
    _state["pending"] = True
    if not all(_when_done(module, _retry_pending) for module in busy):
        _state["pending"] = False
        register_now()  # cannot watch on this Python: register now rather than never


def _retry_pending():
    """Register now if registration was deferred and no mteb_fairpos module is still executing."""
    if _state.get("pending") and not _initialising_fairpos_modules():
        _state["pending"] = False
        register_now()


def register_now():
    """Register the plugin with the (already imported) mteb; a failure becomes a warning."""
    if _state["registered"]:
        return
    _state["registered"] = True
    try:
        from mteb_fairpos.mteb_plugin import register

        register()
    except Exception as err:  # never break `import mteb`
        import warnings

        warnings.warn(
            f"mteb-fairpos could not register its models and tasks with mteb: {type(err).__name__}: {err}",
            RuntimeWarning,
            stacklevel=2,
        )


def install():
    """Arm the hook (idempotent). Called by mteb_fairpos_hook.pth at start-up."""
    if "mteb" in sys.modules:
        if not _disabled():
            _after_mteb_import()
        return
    if _MtebImportHook not in sys.meta_path:
        sys.meta_path.insert(0, _MtebImportHook)
