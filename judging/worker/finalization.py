"""The parts of the interpreter's finalisation (CPython's ``Py_FinalizeEx``) that ending.py runs for a warm test's
program once its code ended: the final flushes, sys's special names, and the teardown of the program's modules and
builtins, so that ``__del__`` methods run and print as a cold interpreter's do.

Guarantees: sys.stdout and sys.stderr flushed as the interpreter flushes them (``flush_std_files``); sys's names
that hold user values cleared and its files restored (``clear_special_names``); every module the program added,
and __main__, torn down in the interpreter's order, builtins restored, with a collection between and after
(``Finalization.tear_down_modules``). What is left different: objects hung on a module the worker imported are not
finalised warm.

What would break it: calling through a name the program can replace (``gc.collect``, ``_weakref.ref``): each is
bound here as the worker starts (names bound at start); a ``Finalization`` taken before the worker's last import
(its modules would count as the program's and be torn down in every child).

Page-copy tricks: ``Finalization`` remembers, as the worker starts, the modules it has and the last of them, so a
child's teardown walks back over the program's own entries in sys.modules only (a walk of every entry writes to,
and so copies, the page of each module the worker imported: ~50 a test); builtins are restored only where the
program added or removed a name (a full restore writes to every builtin's page: ~45 a test).
"""

import gc
import sys
import _weakref

# Bound as the worker starts (see above).
COLLECT, WEAK_REFERENCE = gc.collect, _weakref.ref


def flush_std_files():
    """``Py_FinalizeEx``'s flush of sys.stdout and sys.stderr: a closed one is skipped (one whose ``closed`` cannot be
    read or tested counts as open, ``file_is_closed``), a failed flush of stdout is reported as unraisable; False if
    either failed (the interpreter then exits 120)."""
    flushed = True
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name, None)
        try:
            if stream is None or stream.closed:
                continue
        except BaseException:
            pass
        try:
            stream.flush()
        except BaseException as error:
            flushed = False
            if name == "stdout":
                try:
                    import traceback

                    sys.stderr.write(
                        f"Exception ignored in: {stream!r}\n" + "".join(traceback.format_exception_only(error))
                    )
                except BaseException:
                    pass
    return flushed


def clear_special_names():
    """``finalize_modules_delete_special``, before the modules' teardown: builtins._ and sys's names that hold user
    values set to None, sys.stdin, stdout and stderr restored to the ones the interpreter started with."""
    import builtins

    builtins._ = None
    for name in (
        "path",
        "argv",
        "ps1",
        "ps2",
        "last_type",
        "last_value",
        "last_traceback",
        "path_hooks",
        "path_importer_cache",
        "meta_path",
        "__interactivehook__",
    ):
        sys.__dict__[name] = None
    for name in ("stdin", "stdout", "stderr"):
        sys.__dict__[name] = sys.__dict__.get(f"__{name}__")


class Finalization:
    """What a child's finalisation needs of the worker's start, taken once by the worker after its last import and
    before any fork: builtins' namespace and the interpreter's copy of it (made before it set ``open``:
    ``init_set_builtins_open``), the worker's modules and the last of them in sys.modules."""

    def __init__(self):
        self.builtins = vars(sys.modules["builtins"])
        self.builtins_at_start = {name: value for name, value in self.builtins.items() if name != "open"}
        self.worker_modules = frozenset(sys.modules)
        self.last_worker_module = next(iter(reversed(sys.modules.items())))

    def _program_module_names(self):
        """The names in sys.modules that the program added, and __main__, in sys.modules' order: the entries after
        the worker's last module (sys.modules keeps insertion order), or every entry if the program removed or
        replaced that module."""
        name, module = self.last_worker_module
        added = []
        for each in reversed(sys.modules):
            if each == name and sys.modules.get(each) is module:
                names = ([] if "__main__" in added else ["__main__"]) + added[::-1]
                break
            added.append(each)
        else:
            names = list(sys.modules)
        return [each for each in names if each not in self.worker_modules or each == "__main__"]

    def tear_down_modules(self):
        """What the interpreter's finalisation (``finalize_modules``) does to the program's modules and __main__:
        each entry set to None in sys.modules' order (a module nothing else holds goes at once), builtins restored
        (``finalize_restore_builtins``), a collection, then each module still alive, newest first, cleared
        (``_PyModule_ClearDict``: single-underscore names first, then the rest, to None), and a last collection."""
        alive = []
        for name in self._program_module_names():
            module = sys.modules.get(name)
            if isinstance(module, type(sys)):
                alive.append(WEAK_REFERENCE(module))
            if name in sys.modules:
                sys.modules[name] = None
            del module
        builtins, at_start = self.builtins, self.builtins_at_start
        for name in ("open", "_"):  # set after the interpreter's copy, and by clear_special_names
            builtins.pop(name, None)
        if len(builtins) != len(at_start):
            builtins.clear()
            builtins.update(at_start)
        del builtins, at_start
        COLLECT()
        for reference in reversed(alive):
            module = reference()
            if module is None:
                continue
            try:
                names = [key for key in module.__dict__ if key != "__builtins__"]
                for first in (True, False):
                    for key in names:
                        if (key.startswith("_") and not key.startswith("__")) == first:
                            module.__dict__[key] = None
            except BaseException:
                pass
            del module
        COLLECT()
