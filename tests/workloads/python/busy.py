# A busy inner() called by outer(), for SECONDS (argv[1]).
import sys
import time


def inner():
    x = 0
    for i in range(1000):
        x += i * i
    return x


def outer(deadline):
    while time.time() < deadline:
        inner()


deadline = time.time() + float(sys.argv[1])
print("ready", flush=True)
outer(deadline)
