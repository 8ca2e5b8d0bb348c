# Half a second of work in work, then the script exits: its frames must
# be named although the process is gone before the capture ends.
def work(deadline)
  s = 0
  s += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  s
end

work(Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.5)
