# __file__ and __cached__ are gone once the program ended by an exception.
# expected output: 'unused'
import atexit
# test
atexit.register(lambda: print(globals().get('__file__'), globals().get('__cached__', 0)))
raise ValueError
