# ithreads: the main thread (the main interpreter, PL_curinterp) spins in
# Busy::outer → Busy::inner while a second thread, an interpreter of its
# own, spins in Worker::work (tests/perl.rs). Argument: seconds.
use strict;
use warnings;
use threads;

package Worker;

sub work {
    my ($until) = @_;
    my $x = 0;
    while (time() < $until) { $x += $_ for 1 .. 1000 }
    return $x;
}

package Busy;

sub inner {
    my ($until) = @_;
    my $x = 0;
    while (time() < $until) { $x += $_ for 1 .. 1000 }
    return $x;
}

sub outer { inner(@_) }

package main;

$| = 1;
my $until = time() + (shift // 30);
my $worker = threads->create(\&Worker::work, $until);
print "ready\n";
Busy::outer($until);
$worker->join;
