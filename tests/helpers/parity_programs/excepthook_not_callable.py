# sys.excepthook set to 3.
# expected output: 'unused'
import sys
# test
sys.excepthook = 3
raise ValueError(3)
