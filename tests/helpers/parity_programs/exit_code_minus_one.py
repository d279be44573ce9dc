# sys.exit(-1): its low byte, 255.
# expected output: '3'
# test
print(3)
import sys
sys.exit(-1)
