<?php
// outer alternates nap (usleep: a sleep) and listen (fread on a socket
// no one writes to, until its timeout: a blocking read), 20 ms each, for
// SECONDS ($argv[1]), after saying "ready". tests/php.rs: every wait is
// under its caller in fgbpf's off-CPU stacks.
function nap() {
    usleep(20000);
}

function listen($socket) {
    return fread($socket, 1);
}

function outer($deadline, $socket) {
    while (microtime(true) < $deadline) {
        nap();
        listen($socket);
    }
}

[$ours, $theirs] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
stream_set_timeout($ours, 0, 20000);
$deadline = microtime(true) + (float)($argv[1] ?? 10);
echo "ready\n";
outer($deadline, $ours);
