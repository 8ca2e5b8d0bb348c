# Two Ruby threads busy in methods of their own for SECONDS (ARGV[0]), the
# main thread joining them. tests/ruby.rs: each thread's samples are in its
# own method, never in the other's (each thread's stack is read from its
# own execution context).
def spin_a(deadline)
  x = 0
  x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  x
end

def spin_b(deadline)
  y = 0
  y += 2 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  y
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0] || 10)
a = Thread.new { spin_a(deadline) }
b = Thread.new { spin_b(deadline) }
puts "ready"
$stdout.flush
a.join
b.join
