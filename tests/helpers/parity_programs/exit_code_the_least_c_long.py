# sys.exit(-2 ** 63), in range: its low byte, 0.
# expected output: '3'
# test
print(3)
import sys
sys.exit(-2 ** 63)
