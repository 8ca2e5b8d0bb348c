# Three functions sharing the CPU 50/30/20 through one leaf, for SECONDS:
# equal-cost loop iterations, a round of the three (about 1.2 ms here) in a
# random order. Rounds in a fixed order beat against a sampler's period
# (2.004 ms at 499 Hz) and put samples at a handful of fixed points of the
# round, which moved each share by up to 6 points from run to run in fgbpf
# and py-spy alike; a random order breaks that. Rounds of tens of
# milliseconds (the version before this one) last seconds in an emulated
# guest, so that a 4-second window held one or two of them and both
# profilers read 35% for the 50% function there.
import random
import sys
import time


def spin(n):
    s = 0
    for i in range(n):
        s += i
    return s


def fifty():
    spin(25000)


def thirty():
    spin(15000)


def twenty():
    spin(10000)


deadline = time.time() + float(sys.argv[1])
order = [fifty, thirty, twenty]
print("ready", flush=True)
while time.time() < deadline:
    random.shuffle(order)
    for f in order:
        f()
