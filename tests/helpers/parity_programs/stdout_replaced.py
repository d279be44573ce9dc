# sys.stdout replaced: the interpreter's own stdout is flushed at the end.
# expected output: '3'
import sys
# test
sys.__stdout__.write('3')
sys.stdout = open('/dev/null', 'w')
