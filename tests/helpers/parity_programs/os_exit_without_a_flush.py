# os._exit(0): block-buffered stdout never flushed, nothing printed.
# expected output: '3'
import os
# test
print(3)
os._exit(0)
