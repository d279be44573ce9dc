# 4 GiB at once: over the memory limit.
# expected output: 'unused'
# test
hog = bytearray(4 << 30)
