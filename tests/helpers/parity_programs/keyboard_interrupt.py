# KeyboardInterrupt: the interpreter ends by SIGINT.
# expected output: 'unused'
# test
raise KeyboardInterrupt
