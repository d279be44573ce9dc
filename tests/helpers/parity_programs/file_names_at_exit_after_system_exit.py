# __file__ and __cached__ stay when SystemExit ended the program.
# expected output: 'unused'
import atexit
# test
atexit.register(lambda: print(globals().get('__file__'), globals().get('__cached__', 0)))
raise SystemExit(3)
