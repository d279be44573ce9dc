# sys.stdout closed by the program.
# expected output: '3'
import sys
# test
print(3)
sys.stdout.close()
