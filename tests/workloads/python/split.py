# Three functions sharing the CPU 50/30/20 through one leaf, for SECONDS.
# Each call lasts tens of milliseconds: a loop of a few milliseconds, as
# the first version was (2.15 ms here), beats against a sampler's period
# (2.004 ms at 499 Hz) and puts samples at a handful of fixed points of the
# loop, which moved each share by up to 6 points from run to run in fgbpf
# and py-spy alike.
import sys
import time


def spin(n):
    s = 0
    for i in range(n):
        s += i
    return s


def fifty():
    spin(2500000)


def thirty():
    spin(1500000)


def twenty():
    spin(1000000)


deadline = time.time() + float(sys.argv[1])
print("ready", flush=True)
while time.time() < deadline:
    fifty()
    thirty()
    twenty()
