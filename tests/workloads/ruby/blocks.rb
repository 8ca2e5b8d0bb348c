# outer runs a block through Integer#times (a method written in C), the
# block calls work, for SECONDS (ARGV[0]), after saying "ready".
def work(n)
  s = 0
  i = 0
  while i < n
    s += i
    i += 1
  end
  s
end

def outer(deadline)
  t = 0
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    100.times { |i| t += work(i) }
  end
  t
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0] || 10)
puts "ready"
$stdout.flush
outer(deadline)
