# The working folder and $PWD.
# expected output: '/scratch /scratch'
import os
# test
print(os.environ.get('PWD'), os.getcwd())
