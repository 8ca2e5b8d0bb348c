# A thread sleeping in `sleep`, called from nap, for SECONDS (ARGV[0]);
# the main thread waits for it in Thread#join. tests/ruby.rs: the
# sleeper's off-CPU time is under nap.
def nap(deadline)
  sleep 0.05 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
end

deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0] || 10)
sleeper = Thread.new { nap(deadline) }
puts "ready"
$stdout.flush
sleeper.join
