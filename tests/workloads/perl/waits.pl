# Off-CPU waits under their Perl callers (tests/perl.rs): Waits::nap
# sleeps, Waits::slow_read blocks in a read of a socket that a child
# writes to once a second. Argument: seconds.
use strict;
use warnings;
use Socket;
use IO::Handle;

package Waits;

sub nap { select(undef, undef, undef, 0.2) for 1 .. 2 }

sub slow_read {
    my ($fh) = @_;
    my $buf;
    sysread($fh, $buf, 1) or die "read: $!";
    return $buf;
}

package main;

$| = 1;
my $seconds = shift // 30;
socketpair(my $r, my $w, AF_UNIX, SOCK_STREAM, PF_UNSPEC) or die "socketpair: $!";
my $child = fork() // die "fork: $!";
if ($child == 0) {
    close $r;
    while (1) { select(undef, undef, undef, 0.4); syswrite($w, "x") or exit 0 }
}
close $w;
print "ready\n";
my $until = time() + $seconds;
while (time() < $until) {
    Waits::nap();
    Waits::slow_read($r);
}
kill 'KILL', $child;
