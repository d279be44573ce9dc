# The interpreter flushes stdout as the program ends, after atexit and after the teardown (then
# the restored sys.__stdout__).
# expected output: 'unused'
import sys
class Counting:
    def __init__(self, real):
        self.real, self.flushes = real, 0
    def write(self, text):
        return self.real.write(text)
    def flush(self):
        self.flushes += 1
        self.real.write(f'flush {self.flushes}\n')
# test
sys.stdout = Counting(sys.stdout)
print(3)
