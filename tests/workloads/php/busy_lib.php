<?php
// inner and outer, shared by the CLI's busy.php and php-fpm's request.php.
function inner($n) {
    $s = 0;
    for ($i = 0; $i < $n; $i++) {
        $s += ($i * $i) % 7;
    }
    return $s;
}

function outer($deadline) {
    $t = 0;
    while (microtime(true) < $deadline) {
        $t += inner(100000);
    }
    return $t;
}
