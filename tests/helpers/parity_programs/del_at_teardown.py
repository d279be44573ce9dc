# An object whose __del__ prints, destroyed at the interpreter's teardown.
# expected output: '3'
class Late:
    def __del__(self):
        print(3)
late = Late()
# test
