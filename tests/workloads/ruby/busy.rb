# outer calls inner in a loop for SECONDS (ARGV[0]), after saying "ready".
# tests/ruby.rs: every sample of the main thread runs inner under outer.
def inner(n)
  s = 0
  i = 0
  while i < n
    s += (i * i) % 7
    i += 1
  end
  s
end

def outer(deadline)
  t = 0
  t += inner(100_000) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  t
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0] || 10)
puts "ready"
$stdout.flush
outer(deadline)
