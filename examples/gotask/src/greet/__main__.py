"""python -m greet NAME..."""

import sys

from greet import greeting

if __name__ == "__main__":
    for name in sys.argv[1:] or ["world"]:
        print(greeting(name))
