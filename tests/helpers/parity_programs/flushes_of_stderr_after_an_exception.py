# The flushes of stderr when an exception ended the program.
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
sys.stderr = Counting(sys.stderr)
print(3)
raise ValueError
