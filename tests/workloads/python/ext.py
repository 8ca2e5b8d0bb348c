# A C extension called from Python: zlib compressing a large buffer, from
# squeeze(), for SECONDS.
import sys
import time
import zlib

DATA = bytes(range(256)) * 4096 + b"".join(str(i).encode() for i in range(200000))


def squeeze():
    return len(zlib.compress(DATA, 6))


deadline = time.time() + float(sys.argv[1])
print("ready", flush=True)
while time.time() < deadline:
    squeeze()
