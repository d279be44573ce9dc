# sys.last_type and sys.last_value, set before atexit.
# expected output: 'unused'
import sys, atexit
# test
atexit.register(lambda: print(sys.last_type.__name__, sys.last_value))
raise ValueError(3)
