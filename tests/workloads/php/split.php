<?php
// Worker::fifty, thirty and twenty do the same loop 5, 3 and 2 times per
// round, for SECONDS ($argv[1]), after saying "ready": 50/30/20 of the CPU.
// A round lasts ~20 ms, ten of a sampler's periods at 499 Hz, and its
// three calls come in a random order. A sample then lands in each call
// in proportion to its length give or take one per round, whatever the
// phase; a round shorter than the period (it was 0.4 ms, 50,000 loops)
// leaves every sample's call to the phase, and a fixed order lets that
// phase repeat (a CI run measured fifty at 46.8%).
function spin($n) {
    $s = 0;
    for ($i = 0; $i < $n; $i++) {
        $s += $i & 7;
    }
    return $s;
}

class Worker {
    public function fifty() { return spin(2500000); }
    public function thirty() { return spin(1500000); }
    public function twenty() { return spin(1000000); }
}

$deadline = microtime(true) + (float)($argv[1] ?? 10);
echo "ready\n";
$w = new Worker();
$order = ['fifty', 'thirty', 'twenty'];
while (microtime(true) < $deadline) {
    shuffle($order);
    foreach ($order as $method) {
        $w->$method();
    }
}
