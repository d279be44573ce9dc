# An excepthook that raises: both exceptions printed.
# expected output: 'unused'
import sys
def hook(*args):
    raise RuntimeError('in the hook')
sys.excepthook = hook
# test
raise ValueError(3)
