# sys.excepthook deleted: said missing.
# expected output: 'unused'
import sys
# test
del sys.excepthook
raise ValueError(3)
