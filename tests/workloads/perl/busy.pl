# A busy chain three subs deep: the main program calls Busy::outer,
# which calls Busy::inner, which spins (tests/perl.rs). Argument: seconds.
use strict;
use warnings;

package Busy;

sub inner {
    my ($until) = @_;
    my $x = 0;
    while (time() < $until) {
        $x += $_ for 1 .. 1000;
    }
    return $x;
}

sub outer {
    my ($until) = @_;
    return inner($until);
}

package main;

$| = 1;
my $seconds = shift // 30;
print "ready\n";
Busy::outer(time() + $seconds);
