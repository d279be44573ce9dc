# A loop that never ends: the timeout.
# expected output: 'unused'
# test
while True:
    pass
