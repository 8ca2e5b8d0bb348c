<?php
// Half a second of work in work, then the script exits: its frames must
// be named although the process is gone before the capture ends.
function work($deadline) {
    $s = 0;
    while (microtime(true) < $deadline) {
        $s++;
    }
    return $s;
}

work(microtime(true) + 0.5);
