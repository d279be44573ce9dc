# The whole environment.
# expected output: 'unused'
import os
# test
print(sorted(os.environ.items()))
