<?php
// Prepended (-d auto_prepend_file) to a script run by tests/php.rs: PHP's
// own sampler, the excimer extension, samples it from inside every
// millisecond of CPU time, and its collapsed stacks are written to
// $EXCIMER_OUT at the end.
$out = getenv('EXCIMER_OUT');
if ($out) {
    $profiler = new ExcimerProfiler();
    $profiler->setPeriod(0.001);
    $profiler->setEventType(EXCIMER_CPU);
    $profiler->start();
    register_shutdown_function(function () use ($profiler, $out) {
        $profiler->stop();
        file_put_contents($out, $profiler->getLog()->formatCollapsed());
    });
}
