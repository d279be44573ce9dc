# A process left running when the program ends.
# expected output: '3'
import subprocess
# test
print(3)
subprocess.Popen(['/usr/bin/sleep', '30'])
