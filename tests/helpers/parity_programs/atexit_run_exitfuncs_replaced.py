# atexit._run_exitfuncs replaced: atexit still runs.
# expected output: '3'
import atexit
# test
atexit.register(print, 3)
atexit._run_exitfuncs = lambda: None
