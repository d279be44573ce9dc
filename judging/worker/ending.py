"""A warm test's program run and ended as ``python -I -S -B /scratch/main.py`` runs and ends it (CPython's
``Py_RunMain`` and ``Py_FinalizeEx``), in the program's process forked from the worker, so that a warm and a cold
test print and exit alike (tests/helpers/parity_programs/, one program for each way they could differ).

Guarantees: __main__ as the interpreter makes it (``__annotations__``, a SourceFileLoader, ``__file__`` and
``__cached__`` gone once the program ended, unless by SystemExit); the exception that ended the program printed
through ``sys.excepthook`` (its audit event, a failing, exiting or missing hook, ``sys.last_*``) with the
program's frames only; a SystemExit's code read as a C long; then the finalisation in the interpreter's order:
the flushes, threads joined, atexit run, a collection where the program left the collector on, sys's special names
cleared, the program's modules torn down and builtins restored (finalization.py), a last flush, and the exit: the
code, 120 when a final flush failed, or SIGINT to itself, then 128 + SIGINT, for a KeyboardInterrupt. What is left
different: objects hung on a module the worker imported are not finalised warm.

What would break it: calling through a name the program can replace (``os._exit``, ``atexit._run_exitfuncs``,
``sys.audit``, ``signal.signal``...): the interpreter's own ending is C, which a program cannot reach, so each is
bound here as the worker starts (names bound at start; builtins a program replaces are the one way left to reach
this code). An import at the ending: ``atexit``, which ``-S`` leaves unloaded, is imported once, with this module
(a child's ``import atexit`` would run the import system, ~0.2 ms and ~55 pages copied a test).
"""

import atexit
import gc
import os
import signal
import sys

from finalization import COLLECT, clear_special_names, flush_std_files

# Bound as the worker starts (see above).
AUDIT, WRITE, EXIT, KILL, GETPID, SET_SIGNAL = sys.audit, os.write, os._exit, os.kill, os.getpid, signal.signal
RUN_EXITFUNCS, COLLECTING = atexit._run_exitfuncs, gc.isenabled
SIGINT, SIG_DFL = int(signal.SIGINT), signal.SIG_DFL
# The loader the interpreter gives the __main__ of a file it runs (``set_main_loader``), and its own display of an
# exception (what sys.__excepthook__ starts as: a program may replace that name, not this).
SOURCE_FILE_LOADER = sys.modules["_frozen_importlib_external"].SourceFileLoader
DISPLAY = sys.__excepthook__
MISSING = object()
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1


def run_program(path, source, finalization):
    """Run ``source``, the program at ``path``, as ``__main__`` in a fresh module and exit as ``python -I -S -B path``
    would, tearing down with ``finalization`` (the worker's finalization.Finalization). Never returns."""
    import builtins

    main = type(sys)("__main__")
    main.__dict__.update(__annotations__={}, __builtins__=builtins, __file__=path, __cached__=None)
    main.__loader__ = SOURCE_FILE_LOADER("__main__", path)
    sys.modules["__main__"] = main
    sys.argv[:] = [path]
    sys.orig_argv[:] = [sys.orig_argv[0], "-I", "-S", "-B", path]
    code = exit_code_ = failure = None
    try:
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
    except SystemExit as exit:
        flush_io()
        exit_code_ = exit_code(exit)
    except BaseException as error:
        failure = error
    else:
        flush_io()
    interrupted = type(failure) is KeyboardInterrupt  # the interpreter's test: that class, no subclass
    if failure is not None:
        failure.__traceback__ = failure.__traceback__.tb_next  # the program's frames only, as a cold start shows
        flush_io()
        exit_code_ = print_exception(failure)
        code = 1
        del failure  # sys.last_traceback holds the program's frames from here, as a cold interpreter's does
    if exit_code_ is None:  # __file__ and __cached__ go once the program ended, unless by SystemExit
        main.__dict__.pop("__file__", None)
        main.__dict__.pop("__cached__", None)
    else:
        code, interrupted = exit_code_, False
    del main  # sys.modules holds it alone, as the interpreter's own does
    # Py_FinalizeEx.
    try:
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
    except BaseException:
        pass
    try:
        RUN_EXITFUNCS()
    except BaseException:
        pass
    flushed = flush_std_files()
    try:
        if COLLECTING():  # PyGC_Collect, before the modules go: a collection only where the program left it on
            COLLECT()
        clear_special_names()
        finalization.tear_down_modules()
    except BaseException:
        pass
    flushed = flush_std_files() and flushed
    if interrupted:  # the interpreter ends by SIGINT to itself, which pid 1 ignores; then it exits 128 + SIGINT
        SET_SIGNAL(SIGINT, SIG_DFL)
        KILL(GETPID(), SIGINT)
        EXIT(128 + SIGINT)
    EXIT((code or 0) if flushed else 120)


def exit_code(exit):
    """What the interpreter makes of an uncaught SystemExit (``_Py_HandleSystemExit``): an int is read as a C long,
    255 when it does not fit (the low byte otherwise, whatever an int subclass overrides); anything else is
    printed to stderr and exits 1."""
    code = exit.code
    if code is None:
        return 0
    if issubclass(type(code), int):
        value = int.__int__(code)
        return value & 0xFF if LONG_MIN <= value <= LONG_MAX else 255
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1


def flush_io():
    """What the interpreter does as the program's code ends, whichever way (``flush_io``): flush sys.stderr, then
    sys.stdout, every error ignored."""
    for name in ("stderr", "stdout"):
        try:
            getattr(sys, name).flush()
        except BaseException:
            pass


def write_stderr(text):
    """``PySys_WriteStderr``: to sys.stderr, or to fd 2 when that fails."""
    try:
        sys.stderr.write(text)
    except BaseException:
        WRITE(2, text.encode())


def print_exception(error):
    """What the interpreter does with the exception that ended the program (``_PyErr_PrintEx``): sys.last_*, the
    ``sys.excepthook`` audit event, then the hook, outside any handler (an exception in the hook has no context);
    a hook that fails is reported with the original exception, a missing one said missing. Returns the exit code
    of a SystemExit the hook raised (the interpreter exits at once), else None."""
    kind, trace = type(error), error.__traceback__
    sys.last_type, sys.last_value, sys.last_traceback = kind, error, trace
    hook = sys.__dict__.get("excepthook", MISSING)  # None is a hook (calling it fails), a deleted one is missing
    try:
        AUDIT("sys.excepthook", None if hook is MISSING else hook, kind, error, trace)
    except RuntimeError:
        return None
    except BaseException:
        pass
    if hook is MISSING:
        write_stderr("sys.excepthook is missing\n")
        DISPLAY(kind, error, trace)
        return None
    failure = None
    try:
        hook(kind, error, trace)
    except SystemExit as exit:
        return exit_code(exit)
    except BaseException as raised:
        failure = raised
    if failure is not None:
        failure.__traceback__ = failure.__traceback__.tb_next  # the hook's frames only, as the C call shows them
        write_stderr("Error in sys.excepthook:\n")
        DISPLAY(type(failure), failure, failure.__traceback__)
        write_stderr("\nOriginal exception was:\n")
        DISPLAY(kind, error, trace)
    return None
