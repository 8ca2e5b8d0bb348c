<?php
// Worker::fifty, thirty and twenty do the same loop 5, 3 and 2 times per
// round, for SECONDS ($argv[1]), after saying "ready": 50/30/20 of the CPU.
function spin($n) {
    $s = 0;
    for ($i = 0; $i < $n; $i++) {
        $s += $i & 7;
    }
    return $s;
}

class Worker {
    public function fifty() { return spin(50000); }
    public function thirty() { return spin(30000); }
    public function twenty() { return spin(20000); }
}

$deadline = microtime(true) + (float)($argv[1] ?? 10);
echo "ready\n";
$w = new Worker();
while (microtime(true) < $deadline) {
    $w->fifty();
    $w->thirty();
    $w->twenty();
}
