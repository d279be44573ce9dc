# sys.audit replaced: the interpreter's own ending is C and does not call it.
# expected output: 'unused'
import sys
# test
sys.audit = lambda *args: print('replaced')
raise ValueError(3)
