# Three functions sharing the CPU 50/30/20 through one leaf, for SECONDS.
import sys
import time


def spin(n):
    s = 0
    for i in range(n):
        s += i
    return s


def fifty():
    spin(50000)


def thirty():
    spin(30000)


def twenty():
    spin(20000)


deadline = time.time() + float(sys.argv[1])
print("ready", flush=True)
while time.time() < deadline:
    fifty()
    thirty()
    twenty()
