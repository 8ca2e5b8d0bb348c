<?php
// One php-fpm request: outer calls inner for a quarter of a second.
require __DIR__ . '/busy_lib.php';
echo outer(microtime(true) + 0.25);
