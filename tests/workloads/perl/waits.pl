# Off-CPU waits under their Perl callers (tests/perl.rs): Waits::nap
# sleeps (Time::HiRes::sleep, 0.1 s), Waits::slow_read blocks in a read of
# a socket that a child writes to every 0.2 s (about 0.1 s each). The
# parent's time is about half each. Argument: seconds.
use strict;
use warnings;
use Socket;
use Time::HiRes ();

package Waits;

sub nap { Time::HiRes::sleep(0.1) }

sub slow_read {
    my ($fh) = @_;
    my $buf;
    sysread($fh, $buf, 1) or die "read: $!";
    return $buf;
}

package main;

$| = 1;
my $seconds = shift // 30;
socketpair(my $r, my $w, Socket::AF_UNIX, Socket::SOCK_STREAM, Socket::PF_UNSPEC) or die "socketpair: $!";
my $child = fork() // die "fork: $!";
if ($child == 0) {
    close $r;
    while (1) { Time::HiRes::sleep(0.2); syswrite($w, "x") or exit 0 }
}
close $w;
print "ready\n";
my $until = time() + $seconds;
while (time() < $until) {
    Waits::nap();
    Waits::slow_read($r);
}
kill 'KILL', $child;
