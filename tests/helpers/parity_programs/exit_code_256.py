# sys.exit(256): its low byte, 0.
# expected output: '3'
# test
print(3)
import sys
sys.exit(256)
