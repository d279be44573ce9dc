# An excepthook that calls sys.exit: the interpreter exits at once, with its code.
# expected output: 'unused'
import sys, atexit
def hook(*args):
    sys.exit(7)
sys.excepthook = hook
# test
atexit.register(lambda: print(globals().get('__file__')))
raise ValueError(3)
