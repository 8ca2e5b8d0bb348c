<?php
// outer calls inner in a loop for SECONDS ($argv[1]), after saying
// "ready". tests/php.rs: every sample runs inner under outer.
require __DIR__ . '/busy_lib.php';

$deadline = microtime(true) + (float)($argv[1] ?? 10);
echo "ready\n";
outer($deadline);
