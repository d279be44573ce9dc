# The environment the kernel holds for the process.
# expected output: 'unused'
# test
print(sorted(open('/proc/self/environ', 'rb').read().split(b'\0')))
