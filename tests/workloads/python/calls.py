# `fgbpf events -e usdt:/usr/bin/python3.11:python:function__entry`
# (tests/events.rs): after "ready" and a line on stdin, leaf() is called
# N times from outer_a() and N times from outer_b(); "done" once they
# return; then it waits for stdin to close.
#
# CPython 3.11 fires function__entry only while a trace or profile
# function is set (its evaluator checks the probe inside its tracing
# path): a profile function that does nothing is set around the calls.
import sys


def leaf(i):
    return i + 1


def outer_a(n):
    for i in range(n):
        leaf(i)


def outer_b(n):
    for i in range(n):
        leaf(i)


n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
print("ready", flush=True)
sys.stdin.readline()
sys.setprofile(lambda frame, event, arg: None)
outer_a(n)
outer_b(n)
sys.setprofile(None)
print("done", flush=True)
sys.stdin.read()
