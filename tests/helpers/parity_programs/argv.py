# sys.orig_argv and sys.argv.
# expected output: 'unused'
import sys
# test
print(sys.orig_argv[1:], sys.argv)
