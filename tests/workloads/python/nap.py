# A thread that naps in time.sleep, called from nap(), while the main
# thread waits for it in join() (0.1 s at a time, so that its waits begin
# inside a capture and have their stacks), for SECONDS.
import sys
import threading
import time


def nap(deadline):
    while time.time() < deadline:
        time.sleep(0.02)


t = threading.Thread(target=nap, args=(time.time() + float(sys.argv[1]),))
t.start()
print("ready", flush=True)
while t.is_alive():
    t.join(0.1)
